package engine

import (
	"bytes"
	"testing"
)

// newTrustExec is a raid1 of two in-memory members with an executor of
// depth 2.
func newTrustExec(t *testing.T) (*Array, *memBackend, *Executor) {
	t.Helper()
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	be := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be.members = append(be.members, &memMember{data: make([]byte, 64<<9), badRead: map[uint64]bool{}})
	}
	return arr, be, NewExecutor(arr, be, 2, 4096)
}

func deliverAll(be *memBackend, e *Executor) {
	for len(be.pending) > 0 {
		o := be.pending[0]
		be.pending = be.pending[1:]
		e.Done(o.tag, o.op, be.run(o))
	}
}

// A FLUSH (or FUA write) is acknowledged only once a member failure that
// is not durable yet is: the data it makes durable skipped that member,
// and a power loss before the superblocks record the failure would bring
// the member back as in sync, its volatile cache lost.
func TestFlushWaitsForUnpersistedFailure(t *testing.T) {
	arr, be, e := newTrustExec(t)
	st, _ := arr.Fail(1) // failed from elsewhere (another queue, the flusher)
	e.Start(0, ReqFlush, ^uint64(0), 0, false, nil)
	deliverAll(be, e)
	if _, done := be.done[0]; done {
		t.Fatal("FLUSH acknowledged before the member failure was durable")
	}
	if len(be.persists) == 0 || be.persists[len(be.persists)-1].Gen < st.Gen {
		t.Fatalf("FLUSH did not ask for the failure to be persisted: %v", be.persists)
	}
	e.Persisted(st.Gen)
	if err, done := be.done[0]; !done || err != nil {
		t.Fatalf("FLUSH after the persist: done %v err %v", done, err)
	}

	// A FUA write too.
	arr, be, e = newTrustExec(t)
	st, _ = arr.Fail(0)
	e.Start(1, ReqWrite, 0, 8, true, bytes.Repeat([]byte{1}, 4096))
	deliverAll(be, e)
	if _, done := be.done[1]; done {
		t.Fatal("FUA write acknowledged before the member failure was durable")
	}
	e.Persisted(st.Gen)
	if err, done := be.done[1]; !done || err != nil {
		t.Fatalf("FUA write after the persist: done %v err %v", done, err)
	}

	// A flush that exposes the failure itself waits too.
	arr, be, e = newTrustExec(t)
	be.members[1].failed = true
	e.Start(0, ReqFlush, ^uint64(0), 0, false, nil)
	deliverAll(be, e)
	if _, done := be.done[0]; done {
		t.Fatal("FLUSH that failed a member acknowledged before the failure was durable")
	}
	e.Persisted(arr.State().Gen)
	if err, done := be.done[0]; !done || err != nil {
		t.Fatalf("FLUSH after the persist: done %v err %v", done, err)
	}
}
