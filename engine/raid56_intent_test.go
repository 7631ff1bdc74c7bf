package engine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/ublk-raid/ublk-raid/bitmap"
)

// pIntent is a write-intent bitmap of regions of regionSectors array
// sectors, durably dirty once made so: StartWrite of a region not durable
// yet registers the waiter and returns false; the test makes it durable
// and resumes the waiter. It checks each write's EndWrite comes once,
// after its StartWrite, with the same regions, with nothing of the
// write in flight on the members.
type pIntent struct {
	w             *pWorld
	regionSectors uint64
	durable       map[int]bool
	inFlight      map[int]int // writes started, not ended, per region
	waiters       []bitmap.Waiter
	regions       map[bitmap.Waiter][2]int // a waiter's regions
	starts, ends  int
	problem       string
	// shared: other requests' writes may be in flight at an EndWrite
	// (the model test), so that check is off.
	shared bool
}

func (b *pIntent) Regions(sector, count uint64) (int, int) {
	return int(sector / b.regionSectors), int((sector + count - 1) / b.regionSectors)
}

func (b *pIntent) StartWrite(first, last int, w bitmap.Waiter) bool {
	b.starts++
	ready := true
	for r := first; r <= last; r++ {
		b.inFlight[r]++
		ready = ready && b.durable[r]
	}
	if !ready {
		b.waiters = append(b.waiters, w)
		b.regions[w] = [2]int{first, last}
	}
	return ready
}

func (b *pIntent) EndWrite(first, last int) {
	b.ends++
	for r := first; r <= last; r++ {
		if b.inFlight[r] == 0 && b.problem == "" {
			b.problem = fmt.Sprintf("EndWrite of region %d without a StartWrite", r)
		}
		b.inFlight[r]--
	}
	for _, o := range b.w.pending {
		if o.io.Kind == IOWrite && !b.shared && b.problem == "" {
			b.problem = fmt.Sprintf("EndWrite(%d, %d) with a member write in flight: %+v", first, last, o.io)
		}
	}
}

func (b *pIntent) CopiesDiffer(int) bool { return false }

func newPIntent(w *pWorld, regionSectors uint64) *pIntent {
	b := &pIntent{w: w, regionSectors: regionSectors, durable: map[int]bool{}, inFlight: map[int]int{},
		regions: map[bitmap.Waiter][2]int{}}
	for q, e := range w.execs {
		e.Intent, e.Token = b, uint32(7+q)
	}
	w.intent = b
	return b
}

// waiting reports whether request tag of queue q waits for the bitmap.
func (b *pIntent) waiting(q int, tag uint16) bool {
	_, ok := b.regions[bitmap.Waiter(uint64(7+q)<<32|uint64(tag))]
	return ok
}

// resume makes waiter i's regions durable and hands its token back, as
// the flusher does once the batch that dirtied them is on every member.
func (b *pIntent) resume(i int) {
	wt := b.waiters[i]
	b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
	rg := b.regions[wt]
	delete(b.regions, wt)
	for r := rg[0]; r <= rg[1]; r++ {
		b.durable[r] = true
	}
	b.w.execs[int(wt>>32)-7].Resume(uint16(wt))
}

// clearIdle makes region r clean again if no write is in it, as the
// flusher does with an idle region.
func (b *pIntent) clearIdle(r int) {
	if b.inFlight[r] == 0 {
		delete(b.durable, r)
	}
}

// A write is neither planned nor issued before its regions are durably
// dirty (no member operation, no stripe held), runs once resumed, and
// ends its regions once done; reads and flushes do not touch the bitmap.
func TestRaid56ExecutorWaitsForBitmap(t *testing.T) {
	for _, level := range []Level{Level5, Level6} {
		g := raid56Geo(level, 5)
		w := newPWorld(t, g, 1, 2, 64<<10)
		bm := newPIntent(w, 16)
		n := uint32(g.ChunkSectors*uint64(g.DataMembers())) + 3 // more than a stripe: two stripes, regions 0..
		data := make([]byte, int(n)<<9)
		fill(data, uint64(level))
		e := w.execs[0]
		e.Start(1, ReqWrite, 5, n, false, data)
		if len(w.pending) != 0 || w.submits != 0 || len(bm.waiters) != 1 || bm.waiters[0] != bitmap.Waiter(7<<32|1) {
			t.Fatalf("%s: before the bitmap is durable: %d pending, %d submitted, waiters %x", level, len(w.pending), w.submits, bm.waiters)
		}
		w.lockFree(t)
		// Another request meanwhile: a read of the same sectors is served
		// (the old data: zeroes) without the bitmap.
		got := make([]byte, int(n)<<9)
		if err := w.do(t, 0, ReqRead, 5, n, got); err != nil || !bytes.Equal(got, make([]byte, len(got))) {
			t.Fatalf("%s: read while the write waits: %v", level, err)
		}
		if err := w.do(t, 0, ReqFlush, 0, 0, nil); err != nil {
			t.Fatal(err)
		}
		if bm.starts != 1 || bm.ends != 0 {
			t.Fatalf("%s: reads and flushes touched the bitmap: %d starts, %d ends", level, bm.starts, bm.ends)
		}
		first, last := bm.Regions(5, uint64(n))
		for r := first; r <= last; r++ {
			bm.durable[r] = true
		}
		bm.waiters = nil
		e.Resume(1)
		w.settle()
		if err, ok := w.done[0][1]; !ok || err != nil {
			t.Fatalf("%s: resumed write: done %v, %v", level, ok, err)
		}
		delete(w.done[0], 1)
		if bm.starts != 1 || bm.ends != 1 || bm.problem != "" {
			t.Fatalf("%s: %d starts, %d ends: %s", level, bm.starts, bm.ends, bm.problem)
		}
		// Durable regions: the next write goes at once.
		if err := w.do(t, 0, ReqWrite, 5, n, data); err != nil || bm.starts != 2 || bm.ends != 2 || len(bm.waiters) != 0 {
			t.Fatalf("%s: write to durable regions: %v, %d starts, %d ends, waiters %v", level, err, bm.starts, bm.ends, bm.waiters)
		}
		if err := w.do(t, 0, ReqRead, 5, n, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read back: %v", level, err)
		}
		w.parityConsistent(t)
		w.lockFree(t)
		for r, c := range bm.inFlight {
			if c != 0 {
				t.Fatalf("%s: region %d has %d writes in flight at the end", level, r, c)
			}
		}
	}
}

// A write whose regions cannot be made durable fails with the bitmap's
// error, having issued nothing and holding nothing; its regions are ended.
func TestRaid56ExecutorBitmapFailed(t *testing.T) {
	g := raid56Geo(Level5, 4)
	w := newPWorld(t, g, 1, 1, 64<<10)
	bm := newPIntent(w, 8)
	data := make([]byte, 4<<9)
	w.execs[0].Start(0, ReqWrite, 6, 4, false, data)
	if len(bm.waiters) != 1 {
		t.Fatalf("waiters %v", bm.waiters)
	}
	errBM := errors.New("bitmap write failed")
	w.execs[0].ResumeFailed(0, errBM)
	if err, ok := w.done[0][0]; !ok || !errors.Is(err, errBM) {
		t.Fatalf("done %v, %v", ok, err)
	}
	if w.submits != 0 || bm.ends != 1 || bm.problem != "" || bm.inFlight[0] != 0 || bm.inFlight[1] != 0 {
		t.Fatalf("%d submitted, %d ends, in flight %v: %s", w.submits, bm.ends, bm.inFlight, bm.problem)
	}
	w.lockFree(t)
	defer func() {
		if recover() == nil {
			t.Fatal("Resume of a request not waiting for the bitmap did not panic")
		}
	}()
	w.execs[0].Resume(0)
}

// A write that fails a member ends its regions only once the failure is
// durable and the request completes (the bitmap's rule: the member is
// marked missing before EndWrite, so the region is not cleared).
func TestRaid56ExecutorBitmapEndAfterPersist(t *testing.T) {
	g := raid56Geo(Level6, 5)
	w := newPWorld(t, g, 1, 1, 64<<10)
	bm := newPIntent(w, 8)
	for r := range 8 {
		bm.durable[r] = true
	}
	_, _, mem, _ := g.LocateData(2)
	w.failHook = func(o pOp) bool { return o.io.Kind == IOWrite && int(o.io.Member) == mem }
	data := make([]byte, 4<<9)
	fill(data, 9)
	w.start(0, ReqWrite, 2, 4, data)
	if _, ok := w.done[0][0]; ok || bm.ends != 0 {
		t.Fatalf("before the failure is durable: done %v, %d ends", ok, bm.ends)
	}
	w.failHook = nil
	w.persist()
	if err, ok := w.done[0][0]; !ok || err != nil || bm.ends != 1 || bm.problem != "" {
		t.Fatalf("after persist: done %v %v, %d ends: %s", ok, err, bm.ends, bm.problem)
	}
}
