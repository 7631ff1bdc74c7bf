package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. A state file written before write-mostly roles were
// recorded (paths only) names two write-mostly members of a raid1, roles
// 1 and 2; role 2's member failed and its disk is absent at the first
// restart of the new daemon. That restart cannot place the absent path,
// keeps it listed write-mostly (followWriteMostly: the mark is the role's
// until a device takes the role), but records only the roles of the mask,
// where it has none. At the next restart, the disk back (a failed member
// the assembly leaves closed), markWriteMostly reads the roles alone and
// role 2 is no longer write-mostly, while the state file still lists its
// path so: a re-add or a spare then takes role 2 as a normal one. With
// the disk present at the first restart, role 2 keeps the mark
// (TestRestoreKeepsWriteMostlyAfterAnUnheldOne).
func TestRestoreKeepsWriteMostlyOfAMemberOnceAbsent(t *testing.T) {
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, WriteMostly: paths[1:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	failAndStop(t, a, 2)

	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(paths), WriteMostly: []string{paths[1], paths[2]}}}}); err != nil {
		t.Fatal(err)
	}
	fakeDevices(t)

	// A restart with the failed member's disk absent.
	away := paths[2] + ".away"
	if err := os.Rename(paths[2], away); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	if started, failed, err := m.Restore(); err != nil || started != 1 {
		t.Fatalf("Restore with %s absent: %d started, %d failed, %v", paths[2], started, failed, err)
	}
	s := m.arrays[0]
	s.a.StopSync()
	if err := s.a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	s.a.Close()
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || !slices.Contains(st.Arrays[0].WriteMostly, paths[2]) {
		t.Fatalf("state file after the restart without %s: %+v; want it still listed write-mostly", paths[2], st.Arrays)
	}

	// The next restart, the disk back.
	if err := os.Rename(away, paths[2]); err != nil {
		t.Fatal(err)
	}
	m = NewManager(nil, ManagerOptions{StateFile: state})
	if started, failed, err := m.Restore(); err != nil || started != 1 {
		t.Fatalf("Restore with %s back: %d started, %d failed, %v", paths[2], started, failed, err)
	}
	s = m.arrays[0]
	t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	if r := s.a.FailedRoleOf(paths[2]); r != 2 {
		t.Fatalf("%s back: failed role %d, want 2 (the test no longer covers a failed member left closed)", paths[2], r)
	}
	if s.a.WriteMostly != 1<<1|1<<2 {
		t.Errorf("write-mostly roles with %s back: mask %#b, want 0b110 (roles 1 and 2; the state file read %+v)", paths[2], s.a.WriteMostly, st.Arrays[0])
	}
}
