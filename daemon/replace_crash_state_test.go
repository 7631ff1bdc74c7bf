package daemon

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review. Contract: a replace interrupted by a crash resumes or
// rolls back. The daemon's Replace has the array put the new device in the role (the
// old member failed, the new one recorded rebuilding in every
// superblock) before its state file write naming the new device. A daemon
// dying in that window left a state file that listed the old member
// only: the restart found the old member stale, did not open the new
// one, and started the array degraded with the replacement forgotten
// (neither resumed, nor the old member back). The new device is now
// recorded as joining first (StateEntry.Joining), and a start takes it
// if its superblock names the array.
// (TestReplaceStateFileNeverLosesTheRole checks the state file writes
// between themselves; this is the window before them.)
func TestReplaceCrashBeforeStateWriteResumes(t *testing.T) {
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true,
		SyncMinBytes: 64 << 10, SyncMaxBytes: 64 << 10}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	state := filepath.Join(t.TempDir(), "arrays.json")
	entry := StateEntry{Number: 0, UUID: uuid, Members: slices.Clone(paths[:2])}
	if err := SaveState(state, State{Arrays: []StateEntry{entry}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: entry}
	saved := writeState
	t.Cleanup(func() { writeState = saved })
	var atCrash *State // the state file on disk when the new device holds the role
	var role1 string
	writeState = func(path string, s State) error {
		if atCrash == nil && a.Status().Members[1].Path == paths[2] {
			st, err := LoadState(path)
			if err != nil {
				t.Fatal(err)
			}
			atCrash, role1 = &st, a.Status().Members[1].Path
		}
		return saved(path, s)
	}
	if _, err := m.Replace(0, "1", paths[2], false); err != nil {
		t.Fatal(err)
	}
	writeState = saved
	// Killed mid-rebuild: the rebuild stops where it is.
	a.StopSync()
	a.Close()
	if atCrash == nil || role1 != paths[2] {
		t.Fatalf("setup: no state write after the new member took the role (role 1: %q)", role1)
	}
	t.Logf("state file when role 1 was already %s in the superblocks: %v", paths[2], atCrash.Arrays[0].Members)

	// The daemon died there: the next one starts from that state file.
	fakeDevices(t)
	if err := SaveState(state, *atCrash); err != nil {
		t.Fatal(err)
	}
	n := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := n.Restore()
	if err != nil || started != 1 || failed != 0 {
		_, oerr := openRetry(atCrash.Arrays[0].Members, n.restoreSpec(atCrash.Arrays[0]))
		t.Fatalf("restart after a crash mid-replace (role 1 already %s in the superblocks, the state file listing %v): %d started, %d failed, %v; the array stays pending: %v",
			paths[2], atCrash.Arrays[0].Members, started, failed, err, oerr)
	}
	s := n.arrays[0]
	t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	st := s.a.Status()
	if st.Members[1].Path != paths[2] {
		after, _ := LoadState(state)
		t.Fatalf("restart after a crash mid-replace: %s, role 1 %s held by %q; want it held by the replacement %s (resumed). State file now lists %v",
			st.State, st.Members[1].State, st.Members[1].Path, paths[2], after.Arrays[0].Members)
	}
}

// A device recorded as joining whose superblock write never happened (the
// daemon died before it: blank, or another array's) is not the array's:
// the start assembles without it and the saved entry forgets it.
func TestRestoreDropsJoiningDeviceWithoutTheArray(t *testing.T) {
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	fakeDevices(t)
	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(paths[:2]), Joining: paths[2:]}}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	if started, failed, err := m.Restore(); err != nil || started != 1 || failed != 0 {
		t.Fatalf("restart with a blank joining device: %d started, %d failed, %v", started, failed, err)
	}
	s := m.arrays[0]
	t.Cleanup(func() { s.a.Close() })
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if e := st.Arrays[0]; !slices.Equal(e.Members, paths[:2]) || len(e.Joining) != 0 {
		t.Errorf("state file after the restart: members %v, joining %v; want %v and none", e.Members, e.Joining, paths[:2])
	}
}
