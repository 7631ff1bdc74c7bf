package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// removedBeforeStateWrite makes a raid1 of two members whose role 1 was
// failed and removed (superblocks written) by a daemon killed before its
// state file write (dropFromState): the state file still names both. It
// returns the paths and the array's UUID.
func removedBeforeStateWrite(t *testing.T) ([]string, string) {
	t.Helper()
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil { // superblocks written ...
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close() // ... and the daemon is killed before dropFromState.
	return paths, uuid
}

// failAndStop fails a's member role, recorded in the others'
// superblocks, and stops a cleanly.
func failAndStop(t *testing.T, a *array.Array, role int) {
	t.Helper()
	if err := a.Fail(role); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
}

// fakeDevices makes Manager.start create no kernel device (tests without
// a driver).
func fakeDevices(t *testing.T) {
	t.Helper()
	saved := createDevice
	t.Cleanup(func() { createDevice = saved })
	createDevice = func(*ublk.Control, ublk.Target, ublk.Config) (*ublk.Device, error) {
		return &ublk.Device{}, nil
	}
}

// Contract: a remove whose daemon died between the superblock write and
// the state file write is finished by the restart: the entry of an array
// assembled from the state file lists what the array holds (role holders,
// spares, failed members left closed, absent paths), and is saved. The
// removed device, still listed, no longer is: once it is reused (wiped,
// the very point of removing it), the next restart still starts the
// array. (Before, the restart kept its path, nothing could drop it, and
// every restart after the wipe refused the array, "no ublk-raid
// superblock": it stayed pending.)
func TestRestoreDropsMemberRemovedBeforeStateWrite(t *testing.T) {
	paths, uuid := removedBeforeStateWrite(t)
	fakeDevices(t)
	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(paths)}}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	if started, failed, err := m.Restore(); err != nil || started != 1 || failed != 0 {
		t.Fatalf("restart: %d started, %d failed, %v", started, failed, err)
	}
	s := m.arrays[0]
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Arrays[0].Members; !slices.Equal(got, paths[:1]) {
		t.Errorf("state file after the restart lists %v; want %v (%s was removed)", got, paths[:1], paths[1])
	}
	if err := s.a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	s.a.Close()
	// The removed disk is reused: wiped. The next restart starts the array.
	if err := os.WriteFile(paths[1], make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := openRetry(st.Arrays[0].Members, m.restoreSpec(st.Arrays[0]))
	if err != nil {
		t.Fatalf("the restart after the removed member %s was wiped, from the state file's %v: %v", paths[1], st.Arrays[0].Members, err)
	}
	c.Close()
}

// Contract: the same for a replace whose daemon died after the new member
// was recorded and before the old one was dropped (the state file names
// both; the restart holds the new one in the role): the restart drops
// the old member from the entry, so that wiping the old disk does not
// stop the array's next start.
func TestRestoreDropsMemberReplacedBeforeStateWrite(t *testing.T) {
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.ReplaceMember(1, paths[2], false); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	fakeDevices(t)
	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(paths)}}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	if started, failed, err := m.Restore(); err != nil || started != 1 || failed != 0 {
		t.Fatalf("restart: %d started, %d failed, %v", started, failed, err)
	}
	s := m.arrays[0]
	t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{paths[0], paths[2]}; !slices.Equal(st.Arrays[0].Members, want) {
		t.Errorf("state file after the restart lists %v; want %v (%s was replaced)", st.Arrays[0].Members, want, paths[1])
	}
}

// Contract: a failed member the restart leaves closed stays in the entry
// (remove finds its role by its path, and drops it then): the restart
// drops only devices the array let go of.
func TestRestoreKeepsFailedMemberInEntry(t *testing.T) {
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	failAndStop(t, a, 1)
	fakeDevices(t)
	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(paths)}}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	if started, failed, err := m.Restore(); err != nil || started != 1 || failed != 0 {
		t.Fatalf("restart: %d started, %d failed, %v", started, failed, err)
	}
	s := m.arrays[0]
	t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Arrays[0].Members, paths) {
		t.Errorf("state file after the restart lists %v; want %v (the failed member kept until removed)", st.Arrays[0].Members, paths)
	}
	if _, err := m.Remove(0, paths[1]); err != nil {
		t.Fatalf("remove of the failed member %s: %v", paths[1], err)
	}
	if st, err = LoadState(state); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Arrays[0].Members, paths[:1]) {
		t.Errorf("state file after the remove lists %v; want %v", st.Arrays[0].Members, paths[:1])
	}
}

// Contract: remove of a path the state entry lists but the array holds in
// no role, not as a spare, and not as a failed member (it was removed
// already: a daemon killed between the superblock write and the state
// file write, the remove repeated because its answer never came) drops
// the path from the entry and succeeds, as mdadm's remove of a device
// already removed is harmless. (Before, it answered 404, "not a member",
// and the path stayed in the state file: once the removed disk was reused
// (wiped), every restart refused the array.)
func TestRemoveRepeatedAfterCrashDropsRemovedMember(t *testing.T) {
	paths, uuid := removedBeforeStateWrite(t)
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	// Served with the state file's entry as it was (naming both), as by a
	// daemon that did not tidy it at its start.
	e := StateEntry{Number: 0, UUID: uuid, Members: slices.Clone(paths)}
	b, err := openRetry(e.Members, m.restoreSpec(e))
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(b.Close)
	m.arrays[0] = &served{n: 0, a: b, d: &ublk.Device{}, entry: e}
	if err := m.saveState(); err != nil {
		t.Fatal(err)
	}
	// The operator repeats the remove (the answer never came).
	if _, err := m.Remove(0, paths[1]); err != nil {
		t.Errorf("remove %s, already removed, still in the state file: %v", paths[1], err)
	}
	// A path the entry does not list (any more) is still not found.
	if _, err := m.Remove(0, paths[1]); err == nil {
		t.Errorf("remove %s a second time, no longer listed: succeeded; want not found", paths[1])
	}
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetClean(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// The removed disk is reused: wiped.
	if err := os.WriteFile(paths[1], make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := openRetry(st.Arrays[0].Members, m.restoreSpec(st.Arrays[0]))
	if err != nil {
		t.Fatalf("state entry members %v; the next restart after the removed member %s was wiped: %v", st.Arrays[0].Members, paths[1], err)
	}
	c.Close()
}
