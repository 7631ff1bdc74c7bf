package engine

import (
	"errors"
	"testing"
)

// Found by review (fx5): README ("Discard and write-zeroes are advisory"):
// a discard error (EIO) fails no member; "the discard completes when
// another copy took it, and fails with EIO when none did. When some copies
// of a range took it and another refused or failed it, the copies may
// differ there: the range is marked for resync". On a mirror whose one
// member fails the discard with EIO (it may have discarded part of the
// range: "the member holds what it held, or what a discard would leave")
// and whose other member refuses it (EOPNOTSUPP), no copy took it. Done
// marks the EIO op failed but the refusal not, so writeOutcome's covered
// check counts the refused op as a copy that took the piece: the request
// completes with success, and, with no copy "applied", nothing is marked
// for resync although the EIO member may now differ from the other copy.
func TestDiscardEIOAndRefusedNoCopyTookIt(t *testing.T) {
	const eio, enotsupp = -5, -95
	_, be, e := newTrustExec(t)
	var unsynced [][2]uint64
	e.Unsynced = func(sector uint64, sectors uint32) { unsynced = append(unsynced, [2]uint64{sector, uint64(sectors)}) }
	e.Start(0, ReqDiscard, 8, 8, false, nil)
	deliverWith(be, e, func(o memOp) (int32, bool) {
		if o.io.Member == 0 {
			return eio, true
		}
		return enotsupp, true
	})
	err, done := be.done[0]
	if !done {
		t.Fatal("the discard never completed")
	}
	if !errors.Is(err, ErrNoCopy) || len(unsynced) == 0 {
		t.Fatalf("discard: member 0 failed it (EIO), member 1 refused it (EOPNOTSUPP): no copy took it, yet the request completed with err=%v and no range was marked for resync (unsynced %v); README: a discard error fails the request with EIO when no copy took it, and a range some copy failed may differ between the copies (resync)", err, unsynced)
	}
}
