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

// Found by reviewing 25e7280. add-spare writes the state file (the device as
// joining) before the array checks the device, and restore assembles
// with any joining device whose superblock names the array. A copy of a
// member (a ddrescue'd disk, say) names it: add-spare refuses it, but a
// daemon dying during that refused add-spare (its checks read the device)
// leaves a state file with the copy joining, and the restart put it next
// to the member it copies: the array, which the refusal left as it was,
// no longer started. A joining device that is a listed member's copy is
// not taken (joined).
func TestRefusedAddSpareOfMemberCopyCrashKeepsArrayUp(t *testing.T) {
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[2], b, 0o600); err != nil { // a copy of member 0
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "arrays.json")
	entry := StateEntry{Number: 0, UUID: uuid, Members: slices.Clone(paths[:2])}
	if err := SaveState(state, State{Arrays: []StateEntry{entry}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: entry}
	saved := writeState
	t.Cleanup(func() { writeState = saved })
	var atCrash *State // the file while the array checks the device
	writeState = func(path string, s State) error {
		err := saved(path, s)
		if atCrash == nil {
			st, lerr := LoadState(path)
			if lerr != nil {
				t.Fatal(lerr)
			}
			atCrash = &st
		}
		return err
	}
	_, aerr := m.AddSpare(0, []string{paths[2]}, false)
	writeState = saved
	if aerr == nil {
		t.Fatal("setup: add-spare of a copy of member 0 was not refused")
	}
	t.Logf("add-spare refused: %v", aerr)
	a.Close()
	if atCrash == nil {
		t.Fatal("setup: no state file write during the refused add-spare")
	}
	t.Logf("state file during the refused add-spare: members %v joining %v", atCrash.Arrays[0].Members, atCrash.Arrays[0].Joining)

	// The daemon died during that add-spare: the next one starts from
	// that file.
	fakeDevices(t)
	if err := SaveState(state, *atCrash); err != nil {
		t.Fatal(err)
	}
	n := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := n.Restore()
	if started != 1 {
		_, oerr := openRetry(append(slices.Clone(atCrash.Arrays[0].Members), atCrash.Arrays[0].Joining...), n.restoreSpec(atCrash.Arrays[0]))
		t.Fatalf("restart after a crash during a refused add-spare: %d started, %d failed, %v; the array stays down: %v", started, failed, err, oerr)
	}
	t.Cleanup(func() { n.arrays[0].a.Close() })
}
