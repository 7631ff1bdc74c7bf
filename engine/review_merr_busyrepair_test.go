package engine

import (
	"bytes"
	"testing"
)

// Found by review. A member that answers a read with EAGAIN (Backend.Submit: it "cannot
// take io now, with no error of its own": a write given up on it is still
// out) did not fail the read: the read is served by another copy, and the
// busy member's copy is not bad. Reporting it for read repair has the
// repair worker rewrite it, with the range raised in the write barrier
// (every queue's writes to the range held), waiting up to the member
// timeout for the given-up write to return first (array memberIO.do),
// for every read that meets the busy member.
func TestReviewMerrBusyReadNotReportedForRepair(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{5}, 64<<9), badRead: map[uint64]bool{}})
	}
	e := NewExecutor(arr, be, 1, 64<<10)
	be.exec = e
	e.Balance().WriteMostly = 1 << 1 // the read goes to member 0 first
	var repairs []uint64
	e.ReadRepair = func(sector uint64, sectors uint32, bad uint64, _ int32) { repairs = append(repairs, bad) }
	var told []int32
	e.MemberError = func(member int, kind IOKind, res int32) { told = append(told, res) }
	buf := make([]byte, 16<<9)
	e.Start(0, ReqRead, 0, 16, false, buf)
	for len(be.pending) > 0 {
		o := be.pending[0]
		be.pending = be.pending[1:]
		res := be.run(o)
		if o.io.Member == 0 {
			res = -11 // EAGAIN: busy, no error of its own
		}
		e.Done(o.tag, o.op, res)
	}
	if err, done := be.done[0]; !done || err != nil {
		t.Fatalf("read: done %v err %v", done, err)
	}
	if arr.State().Members[0].State != MemberActive {
		t.Fatalf("the busy member was failed by a read: %+v", arr.State().Members[0])
	}
	if len(repairs) != 0 {
		t.Fatalf("a read that member 0 only answered EAGAIN (busy, MemberError told %v) reported member 0's copy for repair %d times (bad masks %v)", told, len(repairs), repairs)
	}
}
