package daemon

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (fx3). LoadState drops an entry's name that
// "no daemon writes" (checkText: U+FFFD refused). But the daemon writes
// the name its superblocks hold (StateEntry.Name = Status().Name), and
// the superblock's own rule (engine.ValidName, what `create --name`
// checks) accepts U+FFFD. An array made by `create --name` and served by
// the daemon through an assembling add is saved with its name; the next
// LoadState misreads that state file: the name is gone (a pending array
// is listed, and its metrics labelled, without it).
func TestReviewfx3LoadStateKeepsNameTheDaemonWrote(t *testing.T) {
	name := "backup\uFFFD"
	if err := engine.ValidName(name); err != nil {
		t.Fatalf("precondition: %v", err)
	}
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, Name: name, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	fakeDevices(t)
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	n := 0
	if _, err := m.Add(context.Background(), AddRequest{Members: paths, Number: &n}); err != nil {
		t.Fatalf("add (assemble): %v", err)
	}
	if s := m.arrays[0]; s != nil {
		t.Cleanup(func() { s.a.StopSync(); s.a.SetClean(true); s.a.Close() })
	}
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || st.Arrays[0].Name != name {
		t.Fatalf("state file the daemon wrote for array %q read back with name %q (entries %d); want the name it wrote", name, st.Arrays[0].Name, len(st.Arrays))
	}
}
