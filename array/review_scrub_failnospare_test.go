package array

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// Found by review: md's md_error sets MD_RECOVERY_INTR whatever the array
// has standing by, so a member failing during a check interrupts it ("md:
// md0: data-check interrupted."), and sync_action/last_sync_action say so.
// Here only a failure with a spare standing by interrupts the check
// (activateSpare's preemptJob); without one the check of a two-way raid1
// goes on over a single copy, compares nothing for the rest of the array
// (arrayStep: fewer than two readable copies, skipped) and ends "ok":
// `detail` shows "last check: ok, mismatch_cnt 0" for a check that
// compared only the part of the array before the failure, and the planted
// difference after it was never looked at.
func TestReviewScrubCheckFailureWithoutSpareReportsOK(t *testing.T) {
	paths := memberFiles(t, 2, 8<<20)
	setRW := hookRW(t) // (before Open: its repair worker takes memberRW)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// A difference at 6 MiB: the check must reach it to see it.
	scribble(t, a, paths[1], 6<<20, 4096, 0x5a)
	dev0 := a.Members[0].Device
	from := int64(a.dataOffset + 2<<20)
	var once sync.Once
	setRW(func(d Device, p []byte, off int64, write bool) error {
		if d == dev0 && p != nil && !write && off >= from {
			// The check reached 2 MiB: member 1 fails now (an operator's
			// fail, or a queue's write error: md_error either way).
			once.Do(func() {
				if err := a.Fail(1); err != nil {
					t.Errorf("fail: %v", err)
				}
			})
		}
		return deviceRW(d, p, off, write)
	})
	t.Cleanup(func() { memberRW = deviceRW })
	a.sync.s = resync.New(a.Engine, a.xbar, newMemberIO(a), resync.Config{})
	var rep SyncReport
	a.SetSyncLog(func(msg string, r SyncReport, err error) {
		if msg == "sync ended" {
			rep = r
		}
	})
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	s := a.SyncStatus()
	if st := a.Engine.State().Members[1].State; st != engine.MemberFaulty {
		t.Fatalf("member 1 is %v: the failure was not injected", st)
	}
	if s.LastCheckResult == "ok" {
		t.Errorf("member 1 failed 2 MiB into the check; the check compared %d of %d sectors (skipped %d) and still ended %q with mismatch_cnt %d: md interrupts a check on any member failure (MD_RECOVERY_INTR), and the difference at 6 MiB was never compared",
			rep.Synced, a.Engine.ArraySectors(), rep.Skipped, s.LastCheckResult, s.MismatchCnt)
	}
}

// hookRW installs, before an array is opened (its repair worker takes
// memberRW when it starts), a memberRW that calls the function given
// later to set (deviceRW until then).
func hookRW(t *testing.T) (set func(func(Device, []byte, int64, bool) error)) {
	var cur atomic.Pointer[func(Device, []byte, int64, bool) error]
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		if f := cur.Load(); f != nil {
			return (*f)(d, p, off, write)
		}
		return deviceRW(d, p, off, write)
	}
	t.Cleanup(func() { memberRW = deviceRW })
	return func(f func(Device, []byte, int64, bool) error) { cur.Store(&f) }
}
