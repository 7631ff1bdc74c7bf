package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Found by review (st). A state entry listing one member twice under two
// paths (a symlink, /dev/disk/by-id/... beside /dev/sdX: a hand edit)
// is not caught by State.check (device numbers and UUIDs are checked for
// duplicates, member paths are not, and add refuses the same device given
// twice under any path, SameDevice). Restore opens both paths: the second
// open finds the first's lock (flock; O_EXCL for a block device), EBUSY,
// which openRetry takes for a dying server's and waits for 10 s, holding
// every start and READY=1 up; then the array is left pending for good
// with "member ... is in use (locked by an array or another program)":
// the daemon itself holds it. Every retry fails the same way. The
// duplicate must be refused with a message that says so (LoadState), or
// left out so that the array starts (md's assembly opens a device once).
func TestReviewstStateEntryMemberTwice(t *testing.T) {
	paths, uuid := stoppedMirror(t, 8<<20)
	link := filepath.Join(t.TempDir(), "by-id-d0")
	if err := os.Symlink(paths[0], link); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: append(slices.Clone(paths), link)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadState(state); err != nil {
		if !strings.Contains(err.Error(), "twice") {
			t.Errorf("LoadState: %v; want it to say that a member is listed twice", err)
		}
		return // refused, saying why: fine
	}
	fakeDevices(t)
	core, logs := observer.New(zapcore.DebugLevel)
	m := NewManager(nil, ManagerOptions{StateFile: state, Log: zap.New(core)})
	started, failed, err := m.Restore()
	if s := m.arrays[0]; s != nil {
		t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	}
	if started == 1 {
		return // the duplicate left out: fine
	}
	var why string
	for _, e := range logs.FilterMessage("array not started").All() {
		why = e.ContextMap()["error"].(string)
	}
	if !strings.Contains(why, "twice") {
		t.Errorf("state entry listing %s twice (also as %s): %d started, %d failed, %v; logged %q: the daemon's own lock on the first path refuses the second, the array never starts, and the log blames another program", paths[0], link, started, failed, err, why)
	}
}
