package daemon

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// failStateWrites makes every state file write fail from now on (a full
// or read-only /var).
func failStateWrites(t *testing.T) {
	t.Helper()
	saved := writeState
	t.Cleanup(func() { writeState = saved })
	writeState = func(string, State) error { return errors.New("no space left on device") }
}

// stateWarned reports whether v warns that the state file was not written.
func stateWarned(v Array) bool {
	return slices.ContainsFunc(v.Warnings, func(w string) bool { return strings.Contains(w, "state file was not written") })
}

// servedRaid1 serves a new raid1 of members at number 0 of a Manager
// writing its state file in a temporary directory (no kernel device).
func servedRaid1(t *testing.T, members []string) (*Manager, *array.Array, string) {
	t.Helper()
	a, err := array.Open(members, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 0, UUID: a.Status().UUID, Members: slices.Clone(members)}}
	if err := m.saveState(); err != nil {
		t.Fatal(err)
	}
	return m, a, state
}

// Contract: a replace whose state file write fails is done (the array
// holds the new member) and says so, with a warning that the state file
// was not written, as Add warns ("a restarted daemon would not serve
// it"): the state file on disk still names the old member only, and once
// the rebuild has ended (the new member recorded active) the next daemon
// start from that file refuses the array (AsRecorded). Before, the
// answer was a plain success and only the daemon's log told.
func TestReplaceStateFileNotWrittenWarns(t *testing.T) {
	paths := files(t, 3, 8<<20)
	m, a, state := servedRaid1(t, paths[:2])
	failStateWrites(t)
	v, err := m.Replace(0, "1", paths[2], false)
	if err != nil {
		t.Fatalf("replace: %v", err)
	}
	if !stateWarned(v) {
		t.Errorf("replace answered %+v without a warning that the state file was not written", v.Warnings)
	}
	if v.Members[1].Path != paths[2] {
		t.Errorf("replace answered members %+v; want role 1 on %s (the replace was done)", v.Members, paths[2])
	}
	a.WaitSync()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// Why it matters: the next daemon, from the file on disk.
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := openRetry(st.Arrays[0].Members, m.restoreSpec(st.Arrays[0])); err == nil {
		b.Close()
		t.Logf("the restart from %v started the array (the test no longer shows why the warning matters)", st.Arrays[0].Members)
	}
}

// Contract: the other member operations that change the state file's
// member list (add-spare, remove, re-add) warn the same way when its
// write fails; done with the state file written, they do not warn.
func TestMemberOpsStateFileNotWrittenWarn(t *testing.T) {
	paths := files(t, 3, 8<<20)
	m, _, _ := servedRaid1(t, paths[:2])

	v, err := m.AddSpare(0, []string{paths[2]}, false)
	if err != nil || len(v.Warnings) != 0 {
		t.Fatalf("add-spare, state file written: %v, warnings %q", err, v.Warnings)
	}
	if v, err = m.Remove(0, paths[2]); err != nil || len(v.Warnings) != 0 {
		t.Fatalf("remove of the spare, state file written: %v, warnings %q", err, v.Warnings)
	}
	if _, err := m.Fail(0, paths[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Remove(0, paths[1]); err != nil {
		t.Fatal(err)
	}

	failStateWrites(t)
	v, err = m.ReAdd(0, paths[1])
	if err != nil {
		t.Fatalf("re-add: %v", err)
	}
	if !stateWarned(v) {
		t.Errorf("re-add, state file not written: warnings %q", v.Warnings)
	}
	m.arrays[0].a.WaitSync()
	v, err = m.AddSpare(0, []string{paths[2]}, false)
	if err != nil {
		t.Fatalf("add-spare: %v", err)
	}
	if !stateWarned(v) || !slices.Contains(v.Spares, paths[2]) {
		t.Errorf("add-spare, state file not written: spares %v, warnings %q", v.Spares, v.Warnings)
	}
	v, err = m.Remove(0, paths[2])
	if err != nil {
		t.Fatalf("remove: %v", err)
	}
	if !stateWarned(v) || slices.Contains(v.Spares, paths[2]) {
		t.Errorf("remove of the spare, state file not written: spares %v, warnings %q", v.Spares, v.Warnings)
	}
}
