package daemon

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// An add whose state file write failed still serves the array, but the
// user is told: a restarted daemon would not serve it again. It used to
// go to the daemon's log only, the add reporting plain success.
func TestAddTellsOfStateFileNotWritten(t *testing.T) {
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	saved := writeState
	t.Cleanup(func() { writeState = saved })
	writeState = func(string, State) error { return errors.New("disk full") }
	s := &served{n: 3, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 3, UUID: a.Status().UUID, Members: paths}}
	w := m.trackAdded(s)
	if !strings.Contains(w, "state file was not written") || !strings.Contains(w, "disk full") {
		t.Errorf("warning %q; want one saying the state file was not written, with why", w)
	}
	if m.arrays[3] != s {
		t.Error("the array is not served")
	}
	writeState = saved
	s2 := &served{n: 4, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 4, UUID: a.Status().UUID, Members: paths}}
	if w := m.trackAdded(s2); w != "" {
		t.Errorf("state file written, yet warning %q", w)
	}
}
