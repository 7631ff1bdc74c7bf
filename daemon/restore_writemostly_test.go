package daemon

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Write-mostly belongs to the role (followWriteMostly): a spare that takes
// a write-mostly role is write-mostly, in the state file too. A spare
// activated as Restore starts the array used to lose it: Restore then set
// the served entry to the state file's, whose write-mostly path was the
// failed member's, and the next restart read the role normally.
func TestRestoreSpareActivationKeepsWriteMostly(t *testing.T) {
	px := files(t, 3, 8<<20) // px[0], px[1] raid1, px[2] spare
	x, err := array.Open(px[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, Spares: px[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := x.Status().UUID
	if err := x.SetClean(true); err != nil {
		t.Fatal(err)
	}
	x.Close()
	// Role 1 fails with the spare not there: the next start with it
	// activates it at once.
	x, err = array.Open(px[:2], array.CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := x.SetClean(true); err != nil {
		t.Fatal(err)
	}
	x.Close()

	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(px), WriteMostly: []string{px[1]}}}}); err != nil {
		t.Fatal(err)
	}
	saved := createDevice
	t.Cleanup(func() { createDevice = saved })
	createDevice = func(_ *ublk.Control, _ ublk.Target, cfg ublk.Config) (*ublk.Device, error) {
		return &ublk.Device{}, nil
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	if _, _, err := m.Restore(); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	s := m.arrays[0]
	m.mu.Unlock()
	if s == nil {
		t.Fatal("array 0 not served")
	}
	t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	if st := s.a.Status(); st.Members[1].Path != px[2] || s.a.WriteMostly != 1<<1 {
		t.Fatalf("role 1 held by %q, write-mostly roles %b; want %q, 10 (the test no longer covers the activation)", st.Members[1].Path, s.a.WriteMostly, px[2])
	}
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || !slices.Equal(st.Arrays[0].WriteMostly, []string{px[2]}) {
		t.Fatalf("state file after Restore: %+v; want write-mostly %q (the spare now in the write-mostly role)", st.Arrays, px[2])
	}
}
