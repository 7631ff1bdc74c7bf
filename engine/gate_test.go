package engine

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ublk-raid/ublk-raid/bitmap"
)

// fakeIntent is an IntentLog with regions of 8 sectors: a region is
// durable once the test commits it; it records misuse.
type fakeIntent struct {
	t        *testing.T
	durable  map[int]bool
	inflight map[int]int
	waiting  []bitmap.Waiter
	needSync map[int]bool
}

func (f *fakeIntent) Regions(sector, count uint64) (int, int) {
	return int(sector / 8), int((sector + count - 1) / 8)
}

func (f *fakeIntent) StartWrite(first, last int, w bitmap.Waiter) bool {
	ready := true
	for r := first; r <= last; r++ {
		f.inflight[r]++
		ready = ready && f.durable[r]
	}
	if !ready {
		f.waiting = append(f.waiting, w)
	}
	return ready
}

func (f *fakeIntent) EndWrite(first, last int) {
	for r := first; r <= last; r++ {
		if f.inflight[r] == 0 {
			f.t.Fatalf("EndWrite of region %d without StartWrite", r)
		}
		f.inflight[r]--
	}
}

func (f *fakeIntent) CopiesDiffer(r int) bool { return f.needSync[r] }

// fakeBarrier turns away writes overlapping [lo, hi).
type fakeBarrier struct {
	lo, hi  uint64
	entered int
}

func (b *fakeBarrier) Enter(sector uint64, sectors uint32) bool {
	if sector < b.hi && sector+uint64(sectors) > b.lo {
		return false
	}
	b.entered++
	return true
}

func (b *fakeBarrier) Exit(uint64, uint32) { b.entered-- }

// gatedExecutor is an executor of a 2-way raid1 on memory members with a
// fakeIntent and a fakeBarrier.
func gatedExecutor(t *testing.T) (*Executor, *memBackend, *fakeIntent, *fakeBarrier) {
	t.Helper()
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1024}
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	be := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be.members = append(be.members, &memMember{data: make([]byte, 1024<<9), badRead: map[uint64]bool{}})
	}
	fi := &fakeIntent{t: t, durable: map[int]bool{}, inflight: map[int]int{}, needSync: map[int]bool{}}
	fb := &fakeBarrier{}
	e := NewExecutor(arr, be, 8, 64<<10)
	e.Intent, e.Barrier = fi, fb
	return e, be, fi, fb
}

func TestExecutorGatesWrites(t *testing.T) {
	e, be, fi, fb := gatedExecutor(t)
	fb.lo, fb.hi, e.Token = 64, 72, 7
	buf := make([]byte, 4096)

	// Tag 0: region 0 not durable: nothing reaches a member.
	e.Start(0, ReqWrite, 0, 8, false, buf)
	if len(be.pending) != 0 || len(fi.waiting) != 1 || fi.waiting[0] != 7<<32|0 {
		t.Fatalf("write to a clean region: %d member ops, waiting %v", len(be.pending), fi.waiting)
	}
	// Tag 1: the barrier turns it away before the bitmap sees it.
	e.Start(1, ReqWrite, 64, 8, false, buf)
	if len(be.pending) != 0 || fi.inflight[8] != 0 || e.Parked() != 1 {
		t.Fatalf("write under the barrier: %d member ops, region 8 in flight %d, parked %d", len(be.pending), fi.inflight[8], e.Parked())
	}
	// Tag 2: a durable region goes at once.
	fi.durable[2] = true
	e.Start(2, ReqWrite, 16, 8, false, buf)
	if len(be.pending) != 2 {
		t.Fatalf("write to a durable region: %d member ops, want 2", len(be.pending))
	}
	// The bitmap commits region 0: tag 0 proceeds.
	fi.durable[0] = true
	e.Resume(0)
	if len(be.pending) != 4 {
		t.Fatalf("after resume: %d member ops, want 4", len(be.pending))
	}
	// The barrier is lowered: tag 1 enters and waits for region 8.
	fb.lo, fb.hi = 0, 0
	e.RetryParked()
	if e.Parked() != 0 || fi.inflight[8] != 1 || len(be.pending) != 4 {
		t.Fatalf("after retry: parked %d, region 8 in flight %d, %d member ops", e.Parked(), fi.inflight[8], len(be.pending))
	}
	fi.durable[8] = true
	e.Resume(1)
	// Regions stay in flight until every member op of their write is done.
	for len(be.pending) > 0 {
		o := be.pending[0]
		be.pending = be.pending[1:]
		r := int((o.io.Sector) / 8)
		if fi.inflight[r] == 0 {
			t.Fatalf("region %d not in flight while its write is", r)
		}
		e.Done(o.tag, o.op, be.run(o))
	}
	for r, n := range fi.inflight {
		if n != 0 {
			t.Fatalf("region %d still has %d writes in flight", r, n)
		}
	}
	if fb.entered != 0 || len(be.done) != 3 {
		t.Fatalf("barrier entered %d, done %v", fb.entered, be.done)
	}

	// Reads of a region awaiting resync go to the lowest-numbered copy.
	fi.needSync[0] = true
	for tag := uint16(0); tag < 4; tag++ {
		e.bal.Inflight[0] = 1 << 20 // the balancer would avoid member 0
		e.Start(tag, ReqRead, 0, 8, false, buf)
		if o := be.pending[len(be.pending)-1]; o.io.Member != 0 {
			t.Fatalf("read of a region awaiting resync went to member %d", o.io.Member)
		}
	}
}

func TestExecutorGatingAllocs(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1024}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}, pending: make([]memOp, 0, 16)}
	for range 2 {
		be.members = append(be.members, &memMember{data: make([]byte, 1024<<9), badRead: map[uint64]bool{}})
	}
	cfg := bitmap.Config{ArrayUUID: [16]byte{1}, ArraySectors: g.ArraySectors(), RegionSectors: 128, BlockSize: 4096,
		AreaOffset: 8192, AreaBytes: 1 << 20, Events: 1}
	bm, err := bitmap.Create(cfg, bitmap.InitClean, bitmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Commit the initial rewrite so regions can become durable.
	for bt := bm.Prepare(); bt != nil; bt = bm.Prepare() {
		bm.Committed(bt, nil)
	}
	e := NewExecutor(arr, be, 8, 64<<10)
	e.Intent = bm
	buf := make([]byte, 4096)
	// Make region 0 durable-dirty.
	e.Start(0, ReqWrite, 0, 8, false, buf)
	for bt := bm.Prepare(); bt != nil; bt = bm.Prepare() {
		for _, w := range bm.Committed(bt, nil) {
			e.Resume(uint16(w))
		}
	}
	drain := func() {
		for i := 0; i < len(be.pending); i++ {
			o := be.pending[i]
			e.Done(o.tag, o.op, be.run(o))
		}
		be.pending = be.pending[:0]
		clear(be.done)
	}
	drain()
	allocs := testing.AllocsPerRun(200, func() {
		e.Start(0, ReqWrite, 0, 8, false, buf)
		drain()
	})
	if allocs != 0 {
		t.Fatalf("a write to a durable-dirty region allocates %.1f times", allocs)
	}
}

// Reads of ranges awaiting resync are ordered with sync steps through the
// barrier, as writes are (read repairs are not the executor's: it reports
// them, and the array rewrites under the raised barrier). Found by resync's
// TestStackModel (raid1 x3 after a crash, sector 0 awaiting resync, the
// copies differing): a resync step read member 0, the chosen copy; member
// 0's sector 0 then went bad; reads during the step answered member 1's
// data and repaired member 0 with it, and the step then wrote member 0's
// old data over members 1 and 2: the repair left the copies different,
// and without it the reads' answer still changed under them.
func TestExecutorOrderedWithSyncSteps(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1024}
	setup := func(needSync bool) (*memBackend, *Executor, *fakeBarrier) {
		arr, _ := NewArray(g)
		be := &memBackend{done: map[uint16]error{}}
		for _, c := range []byte{'a', 'b'} {
			be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{c}, 1024<<9), badRead: map[uint64]bool{}})
		}
		fi := &fakeIntent{t: t, durable: map[int]bool{}, inflight: map[int]int{}, needSync: map[int]bool{0: needSync}}
		fb := &fakeBarrier{}
		e := NewExecutor(arr, be, 2, 4096)
		e.Intent, e.Barrier = fi, fb
		e.RetryUnit = 1
		e.bal.Inflight[1] = 1 << 30
		return be, e, fb
	}
	deliver := func(be *memBackend, e *Executor) {
		for len(be.pending) > 0 {
			o := be.pending[0]
			be.pending = be.pending[1:]
			e.Done(o.tag, o.op, be.run(o))
		}
	}

	// A read of a range awaiting resync waits while a step holds it.
	be, e, fb := setup(true)
	fb.lo, fb.hi = 0, 8
	buf := make([]byte, 512)
	e.Start(0, ReqRead, 0, 1, false, buf)
	if len(be.pending) != 0 || e.Parked() != 1 {
		t.Fatalf("a read of a range awaiting resync went ahead during a sync step: %d member ops", len(be.pending))
	}
	fb.lo, fb.hi = 0, 0
	e.RetryParked()
	if fb.entered != 1 || len(be.pending) != 1 {
		t.Fatalf("after the step: entered %d, %d member ops", fb.entered, len(be.pending))
	}
	deliver(be, e)
	if err, ok := be.done[0]; !ok || err != nil || buf[0] != 'a' || fb.entered != 0 {
		t.Fatalf("read: done %v err %v data %q, entered %d", ok, err, buf[0], fb.entered)
	}

}

// A write whose bitmap batch failed (ResumeFailed) completes with the
// error unissued, and leaves its regions and the barrier.
func TestExecutorResumeFailed(t *testing.T) {
	e, be, fi, fb := gatedExecutor(t)
	e.Start(0, ReqWrite, 0, 16, false, make([]byte, 8192))
	if len(fi.waiting) != 1 {
		t.Fatalf("waiting %v", fi.waiting)
	}
	bad := errors.New("bitmap batch failed")
	e.ResumeFailed(0, bad)
	if len(be.pending) != 0 || !errors.Is(be.done[0], bad) {
		t.Fatalf("%d member ops issued, request ended with %v", len(be.pending), be.done[0])
	}
	if fi.inflight[0] != 0 || fi.inflight[1] != 0 || fb.entered != 0 {
		t.Fatalf("regions in flight %v, barrier entered %d", fi.inflight, fb.entered)
	}
}
