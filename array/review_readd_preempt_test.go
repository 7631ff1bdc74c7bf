package array

import (
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// TestReviewReaddPreemptedResyncLost: a replace preempts the running
// resync (it "stays pending and starts again when the rebuild ends"); when
// the new device then fails its first superblock write, no rebuild starts,
// and nothing starts the preempted resync again: the array is left with
// copies that may differ and no job to make them agree (md restarts a
// needed sync whenever no recovery runs).
// Found by review; a resync stopped for a rebuild that does not start is
// started again (addOpenPlanReset).
func TestReviewReaddPreemptedResyncLost(t *testing.T) {
	paths := memberFiles(t, 4, 8<<20)
	var dead atomic.Bool
	dead.Store(true)
	a, err := Open(paths[:3], CreateSpec{Level: engine.Level1, NoBitmap: true, SyncMaxBytes: 1 << 20,
		OpenDevice: func(p string) (Device, error) {
			d, err := openFile(p)
			if err != nil || p != paths[3] {
				return d, err
			}
			return deadLater{d, &dead}, nil
		}}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sz := int(a.Engine.Geo.MemberSectors << 9)
	for i, p := range paths[:3] {
		scribbleBytes(t, a, p, 0, fill(sz, byte(0x10*i+1)))
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	a.StartBackground()
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(2); err != nil {
		t.Fatal(err)
	}
	if s := a.SyncStatus(); s.Action != "resync" {
		t.Fatalf("precondition: no initial resync running: %+v", s)
	}
	err = a.Replace(2, paths[3])
	t.Logf("replace onto a device that fails its writes: %v", err)
	a.WaitSync()
	if s := a.SyncStatus(); s.ResyncNeeded || s.LastAction != "resync" || s.LastResult != "ok" {
		t.Fatalf("the resync the replace preempted never resumed (replace: %v): %+v", err, s)
	}
}
