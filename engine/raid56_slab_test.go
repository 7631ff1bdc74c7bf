package engine

import (
	"bytes"
	"testing"
	"time"
	"unsafe"
)

// Every plan in the engine's tests takes no more than its slabNeed.
func init() { strictSlabNeed = true }

// freeBufs is how many buffers the pool holds free.
func (p *slabPool) freeBufs() int {
	n := 0
	for _, l := range p.free {
		n += len(l)
	}
	return n
}

// freeBytes is how many bytes the pool holds free.
func (p *slabPool) freeBytes() int {
	n := 0
	for c, l := range p.free {
		n += len(l) * slabSize(c)
	}
	return n
}

// TestSlabPool: buffers by power-of-two class, the bound in bytes, a
// larger free buffer lent to a smaller need at the bound, smaller free
// ones dropped to make room, and lent buffers out of the count.
func TestSlabPool(t *testing.T) {
	var p slabPool
	p.init(1<<20, 4) // largest class 1 MiB: bound 8 MiB
	if p.budget != SlabBudgetMin || len(p.free) != slabClass(1<<20)+1 {
		t.Fatalf("budget %d, classes %d", p.budget, len(p.free))
	}
	a := p.take(5000)
	if len(a) != 1<<slabMinShift || uintptr(unsafe.Pointer(unsafe.SliceData(a)))%4096 != 0 {
		t.Fatalf("a 5000-byte need took %d bytes at %p", len(a), a)
	}
	p.put(a)
	if b := p.take(1 << 14); unsafe.SliceData(b) != unsafe.SliceData(a) {
		t.Fatal("a free buffer of the class was not taken again")
	}
	// Eight of 1 MiB fill the bound (with the 16 KiB one out: seven).
	var big [][]byte
	for {
		b := p.take(1<<19 + 1)
		if b == nil {
			break
		}
		if len(b) != 1<<20 {
			t.Fatalf("a need of 512 KiB + 1 took %d bytes", len(b))
		}
		big = append(big, b)
	}
	if len(big) != 7 || p.bytes != 7<<20+1<<14 {
		t.Fatalf("%d of 1 MiB under the bound, %d bytes", len(big), p.bytes)
	}
	// The rest in 16 KiB ones: 63 of them.
	small := [][]byte{a}
	for b := p.take(1 << 14); b != nil; b = p.take(1 << 14) {
		small = append(small, b)
	}
	if len(small) != 64 || p.bytes != p.budget {
		t.Fatalf("%d of 16 KiB, %d bytes", len(small), p.bytes)
	}
	// At the bound, a free larger buffer serves a small need.
	p.put(big[0])
	if b := p.take(100); len(b) != 1<<20 {
		t.Fatalf("at the bound, a small need took %d bytes", len(b))
	}
	// Free small ones are dropped for a large need.
	for _, b := range small {
		p.put(b)
	}
	if b := p.take(1 << 20); len(b) != 1<<20 || p.bytes != p.budget || p.freeBufs() != 0 {
		t.Fatalf("a 1 MiB need with 64 of 16 KiB free: got %d bytes, %d bytes made, %d free", len(b), p.bytes, p.freeBufs())
	}
	// A lent buffer is out of the count; back past the bound, dropped.
	p.lend(big[1])
	if b := p.take(1 << 20); b == nil {
		t.Fatal("no room made by a lent buffer")
	}
	p.returned(big[1])
	if p.bytes != p.budget || p.freeBufs() != 0 {
		t.Fatalf("a returned buffer kept past the bound: %d bytes, %d free", p.bytes, p.freeBufs())
	}
	p.lend(big[2])
	p.returned(big[2]) // within the bound: kept
	if p.bytes != p.budget || p.freeBufs() != 1 {
		t.Fatalf("a returned buffer within the bound: %d bytes, %d free", p.bytes, p.freeBufs())
	}
}

// TestRaid56StripeBuffersBounded: a queue of 64 tags for 512 KiB requests
// takes no stripe buffer for direct reads, and its 4 KiB writes, all in
// flight at once, take a few pages each from its pool, within its bound,
// not the worst case of a 512 KiB request per tag.
func TestRaid56StripeBuffersBounded(t *testing.T) {
	for _, level := range []Level{Level5, Level6} {
		g := ParityGeometry{Level: level, Members: 5, Layout: LeftSymmetric, ChunkSectors: 128, MemberSectors: 64 * 128}
		const depth, maxBytes = 64, 512 << 10
		w := newPWorld(t, g, 1, depth, maxBytes)
		e := w.execs[0]
		per := g.ChunkSectors * uint64(g.DataMembers())
		buf := make([]byte, 64<<10)
		if err := w.do(t, 0, ReqRead, 3*per+8, 128, buf); err != nil {
			t.Fatal(err)
		}
		if e.slabs.bytes != 0 || e.Stats.DirectReads.Load() != 1 {
			t.Fatalf("%v: a direct read took %d bytes of stripe buffer", level, e.slabs.bytes)
		}
		bufs := make([][]byte, depth)
		for tag := range depth {
			bufs[tag] = make([]byte, 4096)
			fill(bufs[tag], uint64(tag+1))
			e.Start(uint16(tag), ReqWrite, uint64(tag)*per+16, 8, false, bufs[tag])
		}
		w.settle()
		for tag := range depth {
			if err, ok := w.done[0][uint16(tag)]; !ok || err != nil {
				t.Fatalf("%v: write %d: done %v, %v", level, tag, ok, err)
			}
		}
		worst := depth * g.maxSlabNeed(maxBytes, false)
		if e.slabs.bytes > e.slabs.budget || e.slabs.bytes > depth*64<<10 || e.Stats.BufferWaits.Load() != 0 {
			t.Fatalf("%v: %d writes of 4 KiB hold %d bytes of stripe buffer (bound %d, worst case per tag %d), waited %d",
				level, depth, e.slabs.bytes, e.slabs.budget, worst, e.Stats.BufferWaits.Load())
		}
		clear(w.done[0])
		got := make([]byte, 4096)
		for tag := range depth {
			if err := w.do(t, 0, ReqRead, uint64(tag)*per+16, 8, got); err != nil || !bytes.Equal(got, bufs[tag]) {
				t.Fatalf("%v: read back %d: %v", level, tag, err)
			}
		}
		w.parityConsistent(t)
	}
}

// TestRaid56GiveUpWakesBufferWaiter: an operation of the request holding
// the pool's only buffer is given up after the member timeout (its
// buffer lent): the room that makes must wake the queue for the request
// waiting for a buffer (a review found both stalled).
func TestRaid56GiveUpWakesBufferWaiter(t *testing.T) {
	for _, level := range []Level{Level5, Level6} {
		g := raid56Geo(level, 5)
		w := newPWorld(t, g, 1, 2, 64<<10)
		e := w.execs[0]
		e.SerializeBuffers()
		var now time.Duration
		e.Now = func() time.Duration { return now }
		e.MemberTimeout = 10 * time.Second
		w.abandon = true
		hang := hangOfWriteAt2(g)
		per := g.ChunkSectors * uint64(g.DataMembers())
		d0, d1 := make([]byte, 4<<9), make([]byte, 4<<9)
		fill(d0, 1)
		fill(d1, 2)
		e.Start(0, ReqWrite, 2, 4, false, d0)     // stripe 0: takes the only buffer
		e.Start(1, ReqWrite, per+2, 4, false, d1) // stripe 1: waits for it
		if e.reqs[1].phase != paritySlabWait {
			t.Fatalf("%v: tag 1 phase %d", level, e.reqs[1].phase)
		}
		w.deliverExcept(hang)
		now = 11 * time.Second
		e.Tick()
		w.settle()
		_, ok0 := w.done[0][0]
		_, ok1 := w.done[0][1]
		if !ok0 || !ok1 {
			t.Errorf("%v: stalled with room in the pool (bytes %d of %d): done 0 %v, 1 %v; waiting %v, late ops %d",
				level, e.slabs.bytes, e.slabs.budget, ok0, ok1, e.slabs.wait, len(w.late))
		}
	}
}

// deliverTag runs queue 0 tag's operations (and the ones they lead to) to
// the end, leaving the others pending.
func (w *pWorld) deliverTag(tag uint16) {
	for {
		i := -1
		for j, o := range w.pending {
			if o.tag == tag {
				i = j
				break
			}
		}
		if i < 0 {
			return
		}
		w.deliver(i)
	}
}

// TestRaid56BufferWaitHeadKeepsItsPlace: the head of the line for a
// buffer, given one for its old plan, is planned again with a larger need
// (its stripe's parity became untrusted meanwhile: RMW to RCW): it stays
// first in line, not behind a request that came after it (a review found
// it sent to the back).
func TestRaid56BufferWaitHeadKeepsItsPlace(t *testing.T) {
	g := ParityGeometry{Level: Level5, Members: 5, Layout: LeftSymmetric, ChunkSectors: 64, MemberSectors: 64 * 8}
	w := newPWorld(t, g, 1, 4, 64<<10)
	e := w.execs[0]
	e.slabs.budget = 64 << 10 // two of 32 KiB
	untrusted := map[uint64]bool{}
	e.Untrusted = func(s uint64) bool { return untrusted[s] }
	per := g.ChunkSectors * uint64(g.DataMembers())
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = make([]byte, 32<<9)
		fill(bufs[i], uint64(i+1))
	}
	order := []uint16{0, 3, 1, 2}
	for _, tag := range order {
		e.Start(tag, ReqWrite, uint64(tag)*per, 32, false, bufs[tag])
	}
	if len(e.slabs.wait) != 2 || e.slabs.wait[0] != 1 {
		t.Fatalf("setup: wait %v", e.slabs.wait)
	}
	untrusted[1] = true // tag 1's next plan is RCW: 64 KiB
	w.deliverTag(0)
	if !w.wakes[0] {
		t.Fatal("no wake")
	}
	w.wake(0)
	if e.reqs[2].phase != paritySlabWait && e.reqs[1].phase == paritySlabWait {
		t.Errorf("tag 1 (first in line) overtaken by tag 2: wait %v", e.slabs.wait)
	}
	if n := e.Stats.BufferWaits.Load(); n != 2 {
		t.Errorf("buffer waits counted %d, want 2 (one per request that waited)", n)
	}
	w.settle()
	for _, tag := range order {
		if err, ok := w.done[0][tag]; !ok || err != nil {
			t.Fatalf("tag %d: %v %v", tag, ok, err)
		}
	}
	w.parityConsistent(t)
}
