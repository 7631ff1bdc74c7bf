package daemon

import (
	"os"
	"testing"
)

// A spare pulled while the daemon was down: the restart assembles the
// array without it (restoreSpec) and keeps its path in the state entry.
// A grow of that array (every role in sync, the members larger: its
// checks pass) then hands the device over and assembles the array again
// from the entry: that assembly must start it as the restart did, not
// fail on the absent path and leave the device, with its users' I/O,
// served by nobody until a retry.
func TestGrowReassemblyWithAbsentSpare(t *testing.T) {
	paths, uuid := raid1WithPulledSpare(t)
	for _, p := range paths[:2] {
		if err := os.Truncate(p, 16<<20); err != nil {
			t.Fatal(err)
		}
	}
	m := NewManager(nil, ManagerOptions{})
	e := StateEntry{Number: 0, UUID: uuid, Members: paths}
	b, err := openRetry(e.Members, m.restoreSpec(e))
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	p, err := b.GrowCheck(0, false)
	b.Close()
	if err != nil {
		t.Fatalf("grow check of the restarted array: %v", err)
	}
	// Manager.Grow after the hand-over.
	c, err := openRetry(e.Members, m.growSpec(e))
	if err != nil {
		t.Fatalf("the grow's assembly after the hand-over: %v", err)
	}
	defer c.Close()
	if _, err := c.Grow(p.NewMemberSectors); err != nil {
		t.Fatalf("grow: %v", err)
	}
	if got := c.Params().Basic.DevSectors; got != p.NewArraySectors {
		t.Fatalf("grown to %d sectors, want %d", got, p.NewArraySectors)
	}
}
