package engine

import (
	"bytes"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
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
	if len(be.pending) != 0 {
		t.Fatalf("a write planned around a failure not durable was issued before it: %+v", be.pending)
	}
	e.Persisted(st.Gen)
	deliverAll(be, e)
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

// deliverWith delivers the pending operations, answering those res picks
// (ok false: run them).
func deliverWith(be *memBackend, e *Executor, res func(o memOp) (int32, bool)) {
	for len(be.pending) > 0 {
		o := be.pending[0]
		be.pending = be.pending[1:]
		v, ok := res(o)
		if !ok {
			v = be.run(o)
		}
		e.Done(o.tag, o.op, v)
	}
}

// A member that cannot discard or write zeroes (EOPNOTSUPP, EINVAL: a file
// on tmpfs, a disk without the command) is not failed: a discard is
// advisory and completes; a write-zeroes fails with EOPNOTSUPP, so that
// the kernel writes zeroes instead. It used to fail every member at once,
// the last copy included.
func TestUnsupportedDiscardWriteZeroesFailsNoMember(t *testing.T) {
	for _, errno := range []int32{-95, -22} { // EOPNOTSUPP, EINVAL
		arr, be, e := newTrustExec(t)
		var unsynced [][2]uint64
		e.Unsynced = func(sector uint64, sectors uint32) { unsynced = append(unsynced, [2]uint64{sector, uint64(sectors)}) }
		e.Start(0, ReqDiscard, 0, 8, false, nil)
		deliverWith(be, e, func(o memOp) (int32, bool) { return errno, o.io.Kind == IODiscard })
		if err, done := be.done[0]; !done || err != nil {
			t.Fatalf("discard answered %d by every member: done %v err %v", errno, done, err)
		}
		delete(be.done, 0)
		// One member only refuses.
		e.Start(0, ReqDiscard, 8, 8, false, nil)
		deliverWith(be, e, func(o memOp) (int32, bool) { return errno, o.io.Member == 1 })
		if err, done := be.done[0]; !done || err != nil {
			t.Fatalf("discard refused by one member: done %v err %v", done, err)
		}
		// The other member discarded the range: the copies may differ
		// there, so the range must be resynced (reads of it stay on the
		// chosen copy meanwhile). Refused by every member, nothing differs.
		if len(unsynced) != 1 || unsynced[0] != [2]uint64{8, 8} {
			t.Fatalf("discard refused by one member of two: ranges marked unsynced %v, want [[8 8]]", unsynced)
		}
		unsynced = nil
		delete(be.done, 0)
		e.Start(0, ReqWriteZeroes, 0, 8, false, nil)
		deliverWith(be, e, func(o memOp) (int32, bool) { return errno, o.io.Kind == IOWriteZeroes })
		if err, done := be.done[0]; !done || !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Fatalf("write-zeroes answered %d: done %v err %v, want EOPNOTSUPP", errno, done, err)
		}
		if len(unsynced) != 0 {
			t.Fatalf("write-zeroes refused by every member marked %v unsynced", unsynced)
		}
		delete(be.done, 0)
		e.Start(0, ReqWriteZeroes, 16, 8, false, nil)
		deliverWith(be, e, func(o memOp) (int32, bool) { return errno, o.io.Member == 0 })
		if err, done := be.done[0]; !done || !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Fatalf("write-zeroes refused by one member: done %v err %v, want EOPNOTSUPP", done, err)
		}
		if len(unsynced) != 1 || unsynced[0] != [2]uint64{16, 8} {
			t.Fatalf("write-zeroes refused by one member of two: ranges marked unsynced %v, want [[16 8]]", unsynced)
		}
		for i, m := range arr.State().Members {
			if m.State != MemberActive {
				t.Fatalf("errno %d failed member %d: %+v", errno, i, m)
			}
		}
		if len(be.persists) != 0 {
			t.Fatalf("errno %d asked for persists: %v", errno, be.persists)
		}
	}
	// Other errors still fail the member (it has another copy).
	arr, be, e := newTrustExec(t)
	e.Start(0, ReqWriteZeroes, 0, 8, false, nil)
	deliverWith(be, e, func(o memOp) (int32, bool) { return -5, o.io.Member == 1 })
	if arr.State().Members[1].State != MemberFaulty {
		t.Fatal("write-zeroes EIO did not fail the member")
	}
}

// The last in-sync copy is never failed by a write error: the request
// fails with EIO and the member stays (md keeps its last in-sync device).
// It used to be failed, failing the array.
func TestWriteErrorOnLastCopyFailsRequestNotMember(t *testing.T) {
	arr, be, e := newTrustExec(t)
	st, _ := arr.Fail(1)
	e.Persisted(st.Gen)
	be.members[0].failed = true
	buf := bytes.Repeat([]byte{3}, 4096)
	for _, op := range []ReqOp{ReqWrite, ReqFlush, ReqDiscard} {
		e.Start(0, op, 0, 8, false, buf)
		deliverAll(be, e)
		err, done := be.done[0]
		if !done || !errors.Is(err, ErrNoCopy) {
			t.Fatalf("%v on the last copy: done %v err %v, want an EIO error", op, done, err)
		}
		delete(be.done, 0)
		if m := arr.State().Members[0]; m.State != MemberActive {
			t.Fatalf("%v error failed the last in-sync copy: %+v", op, m)
		}
	}
	// The disk comes back: the array serves again.
	be.members[0].failed = false
	e.Start(0, ReqWrite, 0, 8, false, buf)
	deliverAll(be, e)
	if err, done := be.done[0]; !done || err != nil {
		t.Fatalf("write after the member recovered: done %v err %v", done, err)
	}
}

// FailRedundant keeps a member holding the last in-sync copy of some data
// and fails one whose data has another active copy.
func TestFailRedundant(t *testing.T) {
	g := Geometry{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 8, MemberSectors: 64}
	arr10, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	arr10.Fail(1)
	if _, _, out := arr10.FailRedundant(0); out {
		t.Fatal("raid10: the last copy of a mirror pair was failed")
	}
	if _, changed, out := arr10.FailRedundant(2); !changed || !out {
		t.Fatal("raid10: a member with a live partner was not failed")
	}
}

// Two failures at once on a two-way mirror: the check and the change are
// one step, so exactly one of them fails its member.
func TestFailRedundantConcurrent(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	for range 200 {
		arr, err := NewArray(g)
		if err != nil {
			t.Fatal(err)
		}
		var outs [2]bool
		var wg sync.WaitGroup
		for m := range 2 {
			wg.Go(func() { _, _, outs[m] = arr.FailRedundant(m) })
		}
		wg.Wait()
		if outs[0] == outs[1] {
			t.Fatalf("concurrent failures: member 0 out %v, member 1 out %v", outs[0], outs[1])
		}
	}
}

// The resync offset (arrays without a bitmap stopped during a resync)
// round-trips, is refused on a clean array and is bounded by the array.
func TestSuperblockResyncOffset(t *testing.T) {
	sbs, err := NewSuperblocks(ArraySpec{Level: 1, MemberBytes: []uint64{64 << 20, 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	sb := *sbs[0]
	sb.Clean, sb.ResyncOffset = false, 4096
	b, err := sb.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSuperblock(b)
	if err != nil || *got != sb {
		t.Fatalf("round trip: %v, %+v", err, got)
	}
	sb.Clean = true
	if _, err := sb.MarshalBinary(); err == nil {
		t.Fatal("a clean superblock with a resync offset was accepted")
	}
	sb.Clean, sb.ResyncOffset = false, sb.DataSectors*2+8
	if _, err := sb.MarshalBinary(); err == nil {
		t.Fatal("a resync offset past the array was accepted")
	}
}

// syncBackend completes operations on a failed member from within Submit,
// as the ring backend does when it cannot queue one.
type syncBackend struct {
	*memBackend
	e         *Executor
	submitted map[[2]uint32]int // (tag, op) -> times submitted
}

func (b *syncBackend) Submit(tag uint16, op OpID, io MemberIO, data []byte) {
	b.submitted[[2]uint32{uint32(tag), uint32(op)}]++
	if b.members[io.Member].failed {
		b.e.Done(tag, op, -5)
		return
	}
	b.memBackend.Submit(tag, op, io, data)
}

// A read retried from within Submit (the backend completed the failed
// operation at once) submits its retries once. The outer submission went
// on over the retries the nested one had appended and submitted them
// again.
func TestNestedReadRetrySubmittedOnce(t *testing.T) {
	arr, mb, _ := newTrustExec(t)
	for i := range mb.members[0].data {
		mb.members[0].data[i] = 9
		mb.members[1].data[i] = 9
	}
	be := &syncBackend{memBackend: mb, submitted: map[[2]uint32]int{}}
	e := NewExecutor(arr, be, 2, 64<<10)
	be.e = e
	e.Balance().WriteMostly = 1 << 1 // read member 0 first
	mb.members[0].failed = true
	buf := make([]byte, 16<<9)
	e.Start(0, ReqRead, 0, 16, false, buf)
	for k, n := range be.submitted {
		if n != 1 {
			t.Fatalf("operation %v submitted %d times", k, n)
		}
	}
	deliverAll(mb, e)
	if err, done := mb.done[0]; !done || err != nil {
		t.Fatalf("read: done %v err %v", done, err)
	}
	if !bytes.Equal(buf, mb.members[1].data[:16<<9]) {
		t.Fatal("read returned wrong data")
	}
}

// Without a bitmap, reads reaching past ResyncFrom (a full resync pending
// or running) answer from the chosen copy, as resync copies from it: the
// copies may differ there. Below it they are balanced.
func TestReadPastResyncFromUsesChosenCopy(t *testing.T) {
	_, be, e := newTrustExec(t)
	for i := range be.members[0].data {
		be.members[0].data[i], be.members[1].data[i] = 'a', 'b'
	}
	e.Balance().WriteMostly = 1 << 0 // balancing reads member 1
	var from atomic.Uint64
	from.Store(8)
	e.ResyncFrom = &from
	read := func(sector uint64) byte {
		t.Helper()
		buf := make([]byte, 4096)
		e.Start(0, ReqRead, sector, 8, false, buf)
		deliverAll(be, e)
		if err, done := be.done[0]; !done || err != nil {
			t.Fatalf("read %d: done %v err %v", sector, done, err)
		}
		delete(be.done, 0)
		return buf[0]
	}
	if got := read(0); got != 'b' {
		t.Fatalf("read below ResyncFrom answered from %q, want the balanced copy", got)
	}
	if got := read(8); got != 'a' {
		t.Fatalf("read past ResyncFrom answered from %q, want the chosen copy (member 0)", got)
	}
	from.Store(math.MaxUint64)
	if got := read(8); got != 'b' {
		t.Fatalf("read after the resync answered from %q, want the balanced copy", got)
	}
}

// A write planned around a member failure that is not durable is not
// issued until it is; if the record cannot be made (no member takes it)
// the write fails unissued. Issued, it would put data on the other copy
// only, and after a crash the dropped member would come back in sync with
// different data where the bitmap need not say so (its writes may have
// failed too). Found by the array model: the last copy's superblock and
// bitmap areas failed their writes after the other member timed out.
func TestWriteHeldUntilFailureDurable(t *testing.T) {
	arr, be, e := newTrustExec(t)
	arr.Fail(1) // failed from elsewhere (another queue, the flusher)
	e.Start(0, ReqWrite, 0, 8, false, bytes.Repeat([]byte{1}, 4096))
	if len(be.pending) != 0 {
		t.Fatalf("issued before the failure it skips was durable: %+v", be.pending)
	}
	if len(be.persists) == 0 {
		t.Fatal("no persist asked for")
	}
	e.PersistFailed(errors.New("no member took the update"))
	if err, done := be.done[0]; !done || err == nil {
		t.Fatalf("write after a failed persist: done %v err %v (want an error)", done, err)
	}
	if len(be.pending) != 0 || !bytes.Equal(be.members[0].data[:4096], make([]byte, 4096)) {
		t.Fatal("the write reached member 0")
	}
}
