package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
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
	failAndStop(t, x, 1)

	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(px), WriteMostly: []string{px[1]}}}}); err != nil {
		t.Fatal(err)
	}
	fakeDevices(t)
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

// Found by review. A restart of a raid1 whose write-mostly roles are 1 and 2, role 1's
// member failed (recorded faulty; the restart's assembly leaves it
// closed): role 2's member is still in the array and must still be read
// write-mostly. The state entry lists both write-mostly paths; the one
// the array no longer holds must not cost the other its flag.
func TestRestoreKeepsWriteMostlyAfterAnUnheldOne(t *testing.T) {
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, WriteMostly: paths[1:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	failAndStop(t, a, 1)

	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: paths, WriteMostly: []string{paths[1], paths[2]}}}}); err != nil {
		t.Fatal(err)
	}
	fakeDevices(t)

	m := NewManager(nil, ManagerOptions{StateFile: state})
	if started, failed, err := m.Restore(); err != nil || started != 1 {
		t.Fatalf("Restore: %d started, %d failed, %v", started, failed, err)
	}
	s := m.arrays[0]
	t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	if st := s.a.Status(); st.Members[2].Path != paths[2] || st.Members[2].State != "active" {
		t.Fatalf("role 2 after the restart: %+v", st.Members)
	}
	if s.a.WriteMostly&(1<<2) == 0 {
		t.Errorf("after the restart role 2 (%s, write-mostly in the state file) is not write-mostly: mask %#b", paths[2], s.a.WriteMostly)
	}
}

// Found by review. A restart after the members' paths moved (the disks
// came up in another order: what was p1 is now p0 and the other way
// round): the array assembles from its superblocks, each device in its
// own role, and the write-mostly flag must stay on the role (and device)
// that had it, not go to whichever role's device now answers to the
// recorded path. The state file is the one add wrote.
func TestRestoreWriteMostlyFollowsTheRoleWhenPathsMoved(t *testing.T) {
	paths := files(t, 2, 8<<20)
	state := filepath.Join(t.TempDir(), "arrays.json")
	fakeDevices(t)
	m := NewManager(nil, ManagerOptions{StateFile: state})
	zero := 0
	if _, err := m.Add(t.Context(), AddRequest{Members: paths, Level: "1", Number: &zero, NoBitmap: true, WriteMostly: paths[1:]}); err != nil {
		t.Fatal(err)
	}
	a := m.arrays[0].a
	a.StopSync()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// The devices swap their names.
	tmp := paths[0] + ".swap"
	for _, mv := range [][2]string{{paths[0], tmp}, {paths[1], paths[0]}, {tmp, paths[1]}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}

	m = NewManager(nil, ManagerOptions{StateFile: state})
	if started, failed, err := m.Restore(); err != nil || started != 1 {
		t.Fatalf("Restore: %d started, %d failed, %v", started, failed, err)
	}
	s := m.arrays[0]
	t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	st := s.a.Status()
	if st.Members[1].Path != paths[0] {
		t.Fatalf("after the move role 1 is held by %q, want %q: %+v", st.Members[1].Path, paths[0], st.Members)
	}
	if s.a.WriteMostly != 1<<1 {
		t.Errorf("write-mostly roles after the move: mask %#b, want 0b10 (role 1, the device created write-mostly, now at %s); role 0 is now at the recorded path %s",
			s.a.WriteMostly, paths[0], paths[1])
	}
}
