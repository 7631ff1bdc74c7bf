package array

import "testing"

// A check of a raid1 without a bitmap whose full resync is pending (not
// running): the regions awaiting resync are skipped (Check's own rule,
// and md's: it resyncs instead), so their differences are no mismatches.
func TestCheckSkipsRangeAwaitingFullResync(t *testing.T) {
	paths := crashNoBitmap(t, 2, 16<<20)
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if s := b.SyncStatus(); !s.ResyncNeeded {
		t.Fatalf("unclean array without a bitmap: %+v", s)
	}
	if err := b.Check(false); err != nil {
		t.Fatal(err)
	}
	b.WaitSync()
	s := b.SyncStatus()
	t.Logf("%+v", s)
	if s.MismatchCnt != 0 {
		t.Fatalf("check counted %d mismatch sectors in regions awaiting resync", s.MismatchCnt)
	}
}
