package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// TestSyncRecordCarried: a grow closes the array and assembles it again
// in the same run; the last check's result and its mismatch count
// (mismatch_cnt) carry over to the new Array, as md keeps them across a
// resize, until a job of the new one replaces them.
func TestSyncRecordCarried(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Name: "t", Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	scribble(t, a, paths[1], 1<<20, 8192, 0x5a) // two 4 KiB blocks differ
	before := runCheck(t, a)
	if before.MismatchCnt == 0 || before.LastCheck != "check" {
		t.Fatalf("check of differing copies: %+v", before)
	}
	rec := a.SyncRecord()
	stop(t, a)
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if s := b.SyncStatus(); s.MismatchCnt != 0 || s.LastCheck != "" {
		t.Fatalf("a new assembly remembers %+v before the carry", s)
	}
	b.CarrySyncRecord(rec)
	s := b.SyncStatus()
	if s.MismatchCnt != before.MismatchCnt || s.LastCheck != before.LastCheck || s.LastCheckResult != before.LastCheckResult || s.LastAction != before.LastAction {
		t.Fatalf("after the carry: %+v, want the last check of %+v", s, before)
	}
	if err := b.Check(true); err != nil { // a job of its own replaces it
		t.Fatal(err)
	}
	b.WaitSync()
	b.CarrySyncRecord(rec)
	if s := b.SyncStatus(); s.LastCheck != "repair" {
		t.Fatalf("the carry overwrote the new array's own job: %+v", s)
	}
}
