package engine

import (
	"bytes"
	"testing"
)

// A raid0 member holds the only copy of its chunks: a FLUSH whose flush
// failed on one (the array is broken, as md's MD_BROKEN, in memory) must
// not be acknowledged, nor any later FLUSH: the writes acknowledged before it that sit in that
// member's volatile cache are not durable, and fsync would report them
// so (md fails every write, flushes included, of a broken raid0). The
// flush used to succeed as soon as another member flushed, as for a
// mirror, whose other copies hold the data.
func TestExecutorRaid0FlushFailureFailsFlush(t *testing.T) {
	g := Geometry{Level: Level0, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be.members = append(be.members, &memMember{data: make([]byte, 64<<9), badRead: map[uint64]bool{}})
	}
	e := NewExecutor(arr, be, 1, 8192)
	// A write to both members (chunks 0 and 1), acknowledged.
	e.Start(0, ReqWrite, 0, 16, false, bytes.Repeat([]byte{7}, 8192))
	be.runAll(e)
	if err, done := be.done[0]; !done || err != nil {
		t.Fatalf("write: done=%v err=%v", done, err)
	}
	delete(be.done, 0)

	flush := func() (error, bool) {
		e.Start(0, ReqFlush, ^uint64(0), 0, false, nil)
		be.runAll(e)
		if _, done := be.done[0]; !done && len(be.persists) > 0 {
			e.Persisted(be.persists[len(be.persists)-1].Gen)
		}
		err, done := be.done[0]
		delete(be.done, 0)
		return err, done
	}
	// Member 1 fails the flush (its cache, holding chunk 1, is lost).
	be.members[1].failed = true
	if err, done := flush(); !done || err == nil {
		t.Fatalf("raid0 flush that member 1 failed: done=%v err=%v, want an error (chunk 1 is not durable)", done, err)
	}
	if st := arr.State().Members[1].State; st != MemberActive || !arr.Broken() {
		t.Fatalf("member 1 is %v after failing a flush, array broken %v; want active (md's raid0 records no member failure) and broken", st, arr.Broken())
	}
	// A later flush, even one the member answers, cannot make the write's
	// chunk 1 durable: it fails, as md fails every write of a broken
	// raid0.
	be.members[1].failed = false
	if err, done := flush(); !done || err == nil {
		t.Fatalf("raid0 flush with member 1 failed: done=%v err=%v, want an error", done, err)
	}
}
