package bitmap

import (
	"testing"
	"time"
)

// Found by review (bm): a region loaded dirty while a member is missing
// stops being Dirty once its resync is done if the first batch after the
// load failed on the kept member (Failed): ResyncDone drops the needs-sync
// flag and the durable-dirty flag was never set, though the image still
// says dirty and the missing member missed that region's writes. A re-add
// asks Dirty as the recovery goes (array.addMember's need2): the region is
// skipped and the returning member keeps stale data there.
func TestReviewbmDirtyLostAfterFailedFirstBatch(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{})
	// Member 1 leaves; writes to region 5 go to member 0 only.
	b.SetMissing(1, true)
	b.SetEvents(2)
	a.flush(t, b)
	if b.StartWrite(5, 5, 1) {
		t.Fatal("setup: first write did not wait")
	}
	a.flush(t, b)
	b.EndWrite(5, 5)
	a.tick(t, b, 0)
	a.tick(t, b, time.Hour)
	if b.State(5) != Dirty {
		t.Fatal("setup: region 5 cleared while member 1 was missing")
	}
	// Crash, assembly with member 0 only (member 1 still missing).
	cfg := a.cfg
	cfg.Events = 2
	b2, _, err := Load(cfg, [][]byte{a.areas[0], nil}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b2.SetMissing(1, true)
	if !b2.Dirty(5) {
		t.Fatal("setup: region 5 not dirty after load")
	}
	// The first batch fails on member 0, kept as the last copy.
	bt := b2.Prepare()
	if bt == nil {
		t.Fatal("no first batch")
	}
	b2.Failed(bt, nil, nil)
	// The degraded resync has nothing to copy (one copy) and finishes.
	b2.ResyncDone(0, b2.Geometry().Regions-1)
	if b2.State(5) != Dirty {
		t.Fatalf("image says region 5 is %v", b2.State(5))
	}
	if !b2.Dirty(5) {
		t.Fatal("region 5 (written while member 1 was missing, image still dirty) is not Dirty: a re-add of member 1 now would skip it and leave it stale")
	}
}
