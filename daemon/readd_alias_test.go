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

// A failed member the array does not hold (assembly leaves it closed) is
// listed in the state entry under the path it was added by. Re-added by
// another path to the same device (/dev/disk/by-id/... for /dev/nvme1n1),
// the entry used to list both: the next start opened the one device
// twice and did not start the array.
func TestReAddByAnotherPathListsDeviceOnce(t *testing.T) {
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	failAndStop(t, a, 1)
	a, err = array.Open(paths, array.CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if st := a.Status(); st.Members[1].Path != "" {
		t.Fatalf("the failed member is held (%q): the test no longer covers an unheld one", st.Members[1].Path)
	}
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 0, UUID: a.Status().UUID, Members: slices.Clone(paths)}}
	alias := filepath.Join(t.TempDir(), "by-id-member1")
	if err := os.Symlink(paths[1], alias); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReAdd(0, alias); err != nil {
		t.Fatalf("re-add: %v", err)
	}
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 {
		t.Fatalf("state file: %+v", st.Arrays)
	}
	named := 0
	for _, p := range st.Arrays[0].Members {
		if sameDevice(p, paths[1]) {
			named++
		}
	}
	if named != 1 {
		t.Fatalf("state entry members %q name the re-added device %d times; want once", st.Arrays[0].Members, named)
	}
}
