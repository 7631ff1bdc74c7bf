package engine

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// A member that stops answering is given up after MemberTimeout: reads are
// served from the other copy, writes complete on the survivors once the
// failure is persisted, and the late results are dropped as stale even
// after the tag serves another request.
func TestMemberTimeout(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1024}
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	be := &memBackend{done: map[uint16]error{}}
	for i := range 2 {
		m := &memMember{data: bytes.Repeat([]byte{byte('a' + i)}, 1024<<9), badRead: map[uint64]bool{}}
		be.members = append(be.members, m)
	}
	copy(be.members[0].data, bytes.Repeat([]byte{'x'}, 4096))
	copy(be.members[1].data, bytes.Repeat([]byte{'x'}, 4096))
	var now time.Duration
	e := NewExecutor(arr, be, 4, 64<<10)
	be.exec = e
	e.Now = func() time.Duration { return now }
	e.MemberTimeout = 10 * time.Second
	e.bal.Inflight[1] = 1 << 30 // reads go to member 0, the one that hangs

	buf := make([]byte, 4096)
	e.Start(0, ReqRead, 0, 8, false, buf)
	if len(be.pending) != 1 || be.pending[0].io.Member != 0 {
		t.Fatalf("read planned as %+v", be.pending)
	}
	hung := be.pending[0]
	be.pending = nil

	now = 5 * time.Second
	e.Tick()
	if len(be.abandoned) != 0 {
		t.Fatal("an operation younger than the timeout was abandoned")
	}
	// Refused (no spare buffer, or a zero-copy request's pages): it keeps
	// waiting, but its member is failed now, so that later reads leave
	// it alone.
	now = 11 * time.Second
	be.refuseAbandon = true
	e.Tick()
	if len(be.pending) != 0 {
		t.Fatal("an abandonment the backend refused happened: the read was retried")
	}
	if arr.State().Members[0].State != MemberFaulty {
		t.Fatal("the member of a read past the timeout was not failed when the backend could not give the read up")
	}
	be.refuseAbandon = false
	e.Tick()
	if len(be.abandoned) != 1 || arr.State().Members[0].State != MemberFaulty {
		t.Fatalf("after the timeout: abandoned %v, member 0 %v", be.abandoned, arr.State().Members[0].State)
	}
	if len(be.pending) != 1 || be.pending[0].io.Member != 1 {
		t.Fatalf("the read was not retried on member 1: %+v", be.pending)
	}
	o := be.pending[0]
	be.pending = nil
	e.Done(o.tag, o.op, be.run(o))
	if o.data[0] == buf[0] && &o.data[0] == &buf[0] {
		t.Fatal("the read given up and its retry share a buffer")
	}
	if err, ok := be.done[0]; !ok || err != nil || !bytes.Equal(be.buf(0, buf)[:4096], bytes.Repeat([]byte{'x'}, 4096)) {
		t.Fatalf("read after the timeout: done %v err %v", ok, err)
	}

	// Tag 0 serves a write now; the hung read's late result is stale.
	clear(be.done)
	e.Start(0, ReqWrite, 8, 8, false, bytes.Repeat([]byte{'w'}, 4096))
	e.Done(hung.tag, hung.op, 4096)
	if len(be.stale) != 1 || be.stale[0].op != hung.op {
		t.Fatalf("late result not reported stale: %v", be.stale)
	}
	if len(be.pending) != 0 {
		// The write skips member 0, whose failure (by the read) is not
		// durable yet: it is issued once it is.
		t.Fatalf("write issued before the failure it skips was durable: %+v", be.pending)
	}
	if len(be.persists) != 1 || be.persists[0].Members[0].State != MemberFaulty {
		t.Fatalf("persists %v", be.persists)
	}
	e.Persisted(be.persists[0].Gen)
	if len(be.pending) != 1 || be.pending[0].io.Member != 1 {
		t.Fatalf("write planned as %+v", be.pending)
	}
	o = be.pending[0]
	be.pending = nil
	e.Done(o.tag, o.op, be.run(o))
	if err, ok := be.done[0]; !ok || err != nil {
		t.Fatalf("write: done %v err %v", ok, err)
	}

	// A write hanging on a member: after the timeout it completes on the
	// survivor, once the failure is persisted.
	arr2, _ := NewArray(g)
	be2 := &memBackend{done: map[uint16]error{}, members: be.members}
	e2 := NewExecutor(arr2, be2, 4, 64<<10)
	now = 0
	e2.Now = func() time.Duration { return now }
	e2.MemberTimeout = 10 * time.Second
	e2.Start(1, ReqWrite, 0, 8, false, bytes.Repeat([]byte{'z'}, 4096))
	if len(be2.pending) != 2 {
		t.Fatalf("write planned as %+v", be2.pending)
	}
	var hung2 memOp
	for _, o := range be2.pending {
		if o.io.Member == 0 {
			hung2 = o
		} else {
			e2.Done(o.tag, o.op, be2.run(o))
		}
	}
	be2.pending = nil
	if _, ok := be2.done[1]; ok {
		t.Fatal("the write completed while a copy was in flight")
	}
	now = 20 * time.Second
	e2.Tick()
	if _, ok := be2.done[1]; ok || len(be2.persists) != 1 || be2.persists[0].Members[0].State != MemberFaulty {
		t.Fatalf("the write was acknowledged before the failure was persisted (persists %v)", be2.persists)
	}
	e2.Persisted(be2.persists[0].Gen)
	if err, ok := be2.done[1]; !ok || err != nil {
		t.Fatalf("write after the persist: done %v err %v", ok, err)
	}
	e2.Done(hung2.tag, hung2.op, -5)
	if len(be2.stale) != 1 {
		t.Fatal("late failure of the abandoned write not reported stale")
	}
}

// The last in-sync copy is never failed by a timeout (md never fails its
// last in-sync device): a write or read that hangs on it fails after the
// timeout, the member stays active, and a read spanning several retry
// units is not retried on it block by block (each block would wait out
// the timeout again).
func TestMemberTimeoutKeepsLastCopy(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1024}
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	if _, changed := arr.Fail(1); !changed {
		t.Fatal("fail member 1")
	}
	be := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be.members = append(be.members, &memMember{data: make([]byte, 1024<<9), badRead: map[uint64]bool{}})
	}
	var now time.Duration
	e := NewExecutor(arr, be, 4, 64<<10)
	e.Now = func() time.Duration { return now }
	e.MemberTimeout = 10 * time.Second
	e.RetryUnit = 8
	e.Persisted(arr.State().Gen)

	e.Start(0, ReqWrite, 0, 8, false, bytes.Repeat([]byte{'w'}, 4096))
	e.Start(1, ReqRead, 64, 64, false, make([]byte, 64<<9))
	if len(be.pending) != 2 {
		t.Fatalf("planned %+v", be.pending)
	}
	be.pending = nil
	now = 11 * time.Second
	e.Tick()
	if s := arr.State().Members[0].State; s != MemberActive {
		t.Fatalf("the last in-sync copy was failed by a timeout: %v", s)
	}
	if len(be.pending) != 0 {
		t.Fatalf("a timed-out read was retried on the hung member: %+v", be.pending)
	}
	for tag := range uint16(2) {
		if err, ok := be.done[tag]; !ok || err == nil {
			t.Fatalf("request %d: done %v, err %v (want an error)", tag, ok, err)
		}
	}
	if !errors.Is(be.done[0], ErrNoCopy) {
		t.Fatalf("write: %v", be.done[0])
	}
	if len(be.persists) != 0 {
		t.Fatalf("state changes persisted: %v", be.persists)
	}
}

// A read given up after the timeout may still land in the buffer it was
// given (DMA, or a failing read scribbling it) after its retry on another
// copy has filled the range: the retry goes into another buffer
// (Rebuffer), and the request answers with that one, the reads of its
// other ranges still out in the old buffer copied over as they complete.
// (The array model found this on the copy path: a raid10 read whose given
// up read failed late, filling the buffer with garbage over the retry's
// data, answered that garbage.)
func TestLateReadAfterRetry(t *testing.T) {
	g := Geometry{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 8, MemberSectors: 1024}
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	be := &memBackend{done: map[uint16]error{}}
	for i := range 4 {
		// Chunk 0 on members 0 and 1 ('a'), chunk 1 on 2 and 3 ('b').
		be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{"aabb"[i]}, 1024<<9), badRead: map[uint64]bool{}})
	}
	var now time.Duration
	e := NewExecutor(arr, be, 4, 64<<10)
	be.exec = e
	e.Now = func() time.Duration { return now }
	e.MemberTimeout = 10 * time.Second
	e.bal.Inflight[1], e.bal.Inflight[3] = 1<<30, 1<<30 // reads go to 0 and 2
	want := append(bytes.Repeat([]byte{'a'}, 8<<9), bytes.Repeat([]byte{'b'}, 8<<9)...)

	buf := make([]byte, 16<<9)
	e.Start(0, ReqRead, 0, 16, false, buf)
	if len(be.pending) != 2 || be.pending[0].io.Member != 0 || be.pending[1].io.Member != 2 {
		t.Fatalf("read planned as %+v", be.pending)
	}
	hung, b := be.pending[0], be.pending[1]
	be.pending = nil
	// Chunk 1's read fails; its retry (member 3) is out when member 0's
	// read is given up.
	now = 5 * time.Second
	e.Done(b.tag, b.op, -5)
	if len(be.pending) != 1 || be.pending[0].io.Member != 3 {
		t.Fatalf("retry of chunk 1 planned as %+v", be.pending)
	}
	b = be.pending[0]
	be.pending = nil
	now = 11 * time.Second
	e.Tick()
	if len(be.abandoned) != 1 || be.abandoned[0].op != hung.op {
		t.Fatalf("abandoned %+v", be.abandoned)
	}
	if len(be.pending) != 1 || be.pending[0].io.Member != 1 {
		t.Fatalf("retry of chunk 0 planned as %+v", be.pending)
	}
	retry := be.pending[0]
	be.pending = nil
	if &retry.data[0] == &hung.data[0] {
		t.Fatal("the retry reads into the buffer the read given up may still land in")
	}
	// The retry lands; then the read given up fails late, scribbling its
	// buffer; then chunk 1's retry lands in the old buffer.
	e.Done(retry.tag, retry.op, be.run(retry))
	for i := range hung.data {
		hung.data[i] = 0xa5
	}
	e.Done(hung.tag, hung.op, -5)
	if len(be.stale) != 1 {
		t.Fatalf("late read not reported stale: %v", be.stale)
	}
	if _, ok := be.done[0]; ok {
		t.Fatal("the request completed with a read out")
	}
	e.Done(b.tag, b.op, be.run(b))
	if err, ok := be.done[0]; !ok || err != nil {
		t.Fatalf("read: done %v err %v", ok, err)
	}
	if got := be.buf(0, buf)[:16<<9]; !bytes.Equal(got, want) {
		t.Fatalf("read answered %q..., want %q... (late read's data: %v)", got[:4], want[:4], got[0] == 0xa5)
	}
}
