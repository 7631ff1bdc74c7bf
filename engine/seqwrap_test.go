package engine

import (
	"bytes"
	"testing"
	"time"
)

// A member that never answers keeps an operation given up after the
// timeout out for good, while its tag serves request after request. The
// OpID sequence is 16 bits: after 65536 requests a live one would carry
// the late operation's ID, and the late result, when it comes at last,
// would be taken for the live operation's (completing it early, with the
// data the late read put in another buffer). No request takes the
// sequence of a given-up operation still out.
func TestGivenUpOperationSurvivesSequenceWrap(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1024}
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	be := &memBackend{done: map[uint16]error{}}
	for i := range 2 {
		be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{byte('a' + i)}, 1024<<9), badRead: map[uint64]bool{}})
	}
	var now time.Duration
	e := NewExecutor(arr, be, 1, 64<<10)
	be.exec = e
	e.Now = func() time.Duration { return now }
	e.MemberTimeout = 10 * time.Second
	e.bal.Inflight[1] = 1 << 30 // reads go to member 0 while it is in sync
	e.Start(0, ReqRead, 0, 8, false, make([]byte, 4096))
	hung := be.pending[0]
	be.pending = nil
	now = 11 * time.Second
	e.Tick() // given up: member 0 fails, the read goes to member 1
	for _, st := range be.persists {
		e.Persisted(st.Gen)
	}
	runOne := func() {
		for len(be.pending) > 0 {
			o := be.pending[0]
			be.pending = be.pending[1:]
			e.Done(o.tag, o.op, be.run(o))
		}
		if _, ok := be.done[0]; !ok {
			t.Fatal("a request did not complete")
		}
		delete(be.done, 0)
	}
	runOne()
	// Member 0 back in sync (re-added and rebuilt, say): reads go to it
	// again, and its device still holds the given-up read.
	arr.Update(func(ms []MemberStatus) { ms[0] = MemberStatus{State: MemberActive} })
	e.bal.Inflight[1] = 1 << 30
	for range 1<<16 - 1 { // the next request takes the sequence again
		e.Start(0, ReqRead, 0, 8, false, make([]byte, 4096))
		runOne()
	}
	// One more, whose read waits on member 0; the late result comes now.
	buf := make([]byte, 4096)
	e.Start(0, ReqRead, 0, 8, false, buf)
	if len(be.pending) != 1 {
		t.Fatalf("planned %+v", be.pending)
	}
	live := be.pending[0]
	be.pending = nil
	stale := len(be.stale)
	e.Done(hung.tag, hung.op, 4096)
	if _, ok := be.done[0]; ok || len(be.stale) != stale+1 {
		t.Fatalf("the late result of a read given up 65536 requests ago was taken for a live one (done %v, stale %d)", ok, len(be.stale)-stale)
	}
	e.Done(live.tag, live.op, be.run(live))
	if err, ok := be.done[0]; !ok || err != nil || !bytes.Equal(buf, bytes.Repeat([]byte{'a'}, 4096)) {
		t.Fatalf("the live read: done %v, %v", ok, err)
	}
	if len(e.given) != 0 {
		t.Fatalf("given-up operations still recorded after they came back: %v", e.given)
	}
}
