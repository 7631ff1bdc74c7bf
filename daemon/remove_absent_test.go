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

// A spare pulled while the daemon was down: the restart starts the array
// without it and keeps its path in the state entry. `remove` of that path
// must drop it from the state file (as remove always does): otherwise
// nothing can, and a new disk put in later at that path (no superblock
// of the array) keeps the array from starting at the next restart.
func TestRemoveAbsentSpareDropsItFromState(t *testing.T) {
	paths, uuid := raid1WithPulledSpare(t)
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
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
	if _, err := m.Remove(0, paths[2]); err != nil {
		t.Fatalf("remove of the absent spare: %v", err)
	}
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || slices.Contains(st.Arrays[0].Members, paths[2]) || len(st.Arrays[0].Members) != 2 {
		t.Fatalf("state file after removing the absent spare %s: %+v", paths[2], st.Arrays)
	}
	if err := b.SetClean(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// A new, blank disk at the old spare's path; the next restart.
	if err := os.WriteFile(paths[2], make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := openRetry(st.Arrays[0].Members, m.restoreSpec(st.Arrays[0]))
	if err != nil {
		t.Fatalf("restart after the remove: %v", err)
	}
	c.Close()
}

// raid1WithPulledSpare makes a raid1 of two member files with a spare
// file, stopped clean, then removes the spare (pulled while no daemon
// ran); it returns the three paths and the array's UUID.
func raid1WithPulledSpare(t *testing.T) ([]string, string) {
	t.Helper()
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := os.Remove(paths[2]); err != nil {
		t.Fatal(err)
	}
	return paths, uuid
}
