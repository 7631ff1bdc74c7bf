package array

import (
	"errors"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. A member failed at a clean stop because its flush
// failed (failUnflushed) must not be replaced by a spare while the array
// stops: the failure starts the spare's activation on its own goroutine
// (writeSuperblocks), which may run after the clean mark and before Close
// and write a generation "in use" over the mark. The stop then reported
// clean while the superblocks said in use: without a bitmap the next
// start resynced in full. (The late goroutine is run here by hand, after
// the mark: what the scheduler may do.)
func TestCleanStopFlushFailureLeavesSuperblocksClean(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	// The stop, as the daemon and run do it: StopSync, SetClean(true), Close.
	a.StopSync()
	orig := memberSync
	t.Cleanup(func() { memberSync = orig })
	memberSync = func(m *Member) error {
		if m.Path == paths[1] {
			return errors.New("flush: I/O error")
		}
		return orig(m)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatalf("clean mark with a redundant member's flush failed: %v", err)
	}
	a.activateSpare() // the goroutine the failure started, scheduled late
	a.Close()
	if sb := superblockOf(t, paths[0]); !sb.Clean {
		t.Fatalf("%s after a clean stop: clean %v, role 1 %v; want clean", paths[0], sb.Clean, sb.Roles[1].State)
	}
}
