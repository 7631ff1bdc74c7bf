package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review: a check skips regions awaiting resync (README: "regions
// awaiting resync ... which the resync makes equal anyway"), and a write
// racing a check must never count as a mismatch (md holds the range).
// arrayStep asks Job.Need (neededChecked: written and not NeedsSync)
// before it raises the step's range, and not again after: a write that
// is in flight over the range while the check waits for it, and that
// leaves the copies different and marks its region for resync (the
// executor's Unsynced: it failed on a member kept as the last copy of
// other data, e.g. a raid1 whose other member is still rebuilding, or a
// raid10 with an odd member count and a member out), is then compared
// the moment it exits, and counted in mismatch_cnt (a repair would write
// it too), although its region is awaiting the resync that follows.
func TestReviewScrubCheckCountsWriteMarkedDuringRaise(t *testing.T) {
	paths := memberFiles(t, 2, 8<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	writeRegions(a, 0, a.Bitmap.Geometry().Regions-1)
	a.WaitSync()
	if s := runCheck(t, a); s.MismatchCnt != 0 {
		t.Fatalf("setup: check found %d", s.MismatchCnt)
	}
	// A user write to sectors 0..7 is in flight (entered the barrier).
	if !a.barrier.Enter(0, 8) {
		t.Fatal("enter")
	}
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	// The check's first step (region 0, written and clean when it asked)
	// is raising its range and waits for the write.
	for deadline := time.Now().Add(10 * time.Second); len(a.xbar.sem) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the check never raised its first step")
		}
	}
	// The write reaches member 0 and fails on member 1, which is kept:
	// the executor marks the range unsynced (Unsynced -> markUnsynced),
	// then the write ends.
	scribble(t, a, paths[0], 0, 4096, 0x77)
	a.markUnsynced(0, 8)
	a.barrier.Exit(0, 8)
	a.WaitSync()
	s := a.SyncStatus()
	if s.LastCheck != "check" {
		t.Fatalf("no check ended: %+v", s)
	}
	if s.MismatchCnt != 0 {
		t.Errorf("check counted mismatch_cnt %d for a region a racing write marked awaiting resync before the check read it (it skips such regions, and a write racing a check never counts)", s.MismatchCnt)
	}
}
