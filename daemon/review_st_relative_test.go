package daemon

import (
	"path/filepath"
	"testing"
)

// Found by review (st). State.check says: "A relative member path, which
// older daemons took, leaves its entry pending." Nothing does so: restore
// hands the relative paths to array.Open, which resolves them against the
// daemon's working directory (whatever files or device nodes happen to be
// there: for a daemon under systemd, /), and the array starts from them;
// its entry is then saved again with the relative paths. The API refuses
// relative paths for this very reason (checkAbs).
func TestReviewstRelativeMemberPathLeftPending(t *testing.T) {
	paths, uuid := stoppedMirror(t, 8<<20)
	state := filepath.Join(t.TempDir(), "arrays.json")
	rel := []string{filepath.Base(paths[0]), filepath.Base(paths[1])}
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: rel}}}); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(paths[0])) // the daemon's working directory
	fakeDevices(t)
	m := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := m.Restore()
	if s := m.arrays[0]; s != nil {
		t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	}
	if err != nil || started != 0 || failed != 1 {
		t.Errorf("state entry with relative member paths %v: %d started, %d failed, %v; want it left pending (State.check's contract)", rel, started, failed, err)
	}
}
