package daemon

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Each state file a replace writes is one a restart can start the array
// from: a daemon dying between two of them must not leave a file that
// lists neither the old member nor the new one (the restart would then
// start the array without the replacement, forgetting it).
func TestReplaceStateFileNeverLosesTheRole(t *testing.T) {
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{UUID: a.Status().UUID, Members: slices.Clone(paths[:2])}}
	var written [][]string
	saved := writeState
	t.Cleanup(func() { writeState = saved })
	writeState = func(path string, s State) error {
		for _, e := range s.Arrays {
			written = append(written, slices.Clone(e.Members))
		}
		return saved(path, s)
	}
	if _, err := m.Replace(0, "1", paths[2], false); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if len(written) == 0 {
		t.Fatal("the replace wrote no state file")
	}
	for i, ms := range written {
		if !slices.Contains(ms, paths[1]) && !slices.Contains(ms, paths[2]) {
			t.Errorf("state file %d of the replace lists %v: neither the old member %s nor the new %s", i, ms, paths[1], paths[2])
		}
	}
	if last := written[len(written)-1]; !slices.Contains(last, paths[2]) || slices.Contains(last, paths[1]) {
		t.Errorf("state file after the replace lists %v; want %s in, %s out", last, paths[2], paths[1])
	}
}
