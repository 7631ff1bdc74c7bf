package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by reviewing 650443d: an add-spare of X cut before X's superblock
// write leaves X joining (X blank). At the next boot X and the array's
// listed spare S are not up yet. Counting the members the superblocks name
// that no readable device held (S) took X as the operation's member: X was
// written into the entry's members, and once X and S were there, every
// later start assembled [A B S X], X blank: ErrNotMember, the array never
// started again. An unread joining device is now left out (with a warning).
func TestJoiningUnreadBesideAbsentSpare(t *testing.T) {
	paths := files(t, 4, 8<<20) // A, B, S, X
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true,
		Spares: []string{paths[2]}}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	state := filepath.Join(t.TempDir(), "arrays.json")
	entry := StateEntry{Number: 0, UUID: uuid, Members: slices.Clone(paths[:3]), Joining: []string{paths[3]}}
	if err := SaveState(state, State{Arrays: []StateEntry{entry}}); err != nil {
		t.Fatal(err)
	}
	fakeDevices(t)
	for _, p := range paths[2:] {
		if err := os.Rename(p, p+".notyet"); err != nil {
			t.Fatal(err)
		}
	}
	n := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := n.Restore()
	t.Logf("boot with S and X not up: %d started, %d failed, %v", started, failed, err)
	if s := n.arrays[0]; s != nil {
		s.a.StopSync()
		s.a.Close()
	}
	for _, p := range paths[2:] {
		if err := os.Rename(p+".notyet", p); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := LoadState(state)
	t.Logf("state after the boot: members %v joining %v", after.Arrays[0].Members, after.Arrays[0].Joining)
	n2 := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err = n2.Restore()
	if s := n2.arrays[0]; s != nil {
		t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	}
	if started != 1 {
		_, oerr := array.Open(after.Arrays[0].Members, array.CreateSpec{Level: -1, SkipAbsent: true, AsRecorded: true}, false)
		t.Fatalf("next boot, every device present (open: %v): %d started, %d failed, %v (a blank device whose add-spare never wrote it made the array's member list)", oerr, started, failed, err)
	}
}
