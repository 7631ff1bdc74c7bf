package engine

import (
	"errors"
	"testing"
	"time"
)

// Two read backs in one heal (a write over two stripes failing on kept
// member x in both): one lands, the other is given up by Tick. The tag's
// heal buffer is kept from reuse, and healWrite still takes the rows of
// the one that landed from it (a review found healData slicing a nil
// buffer there: a panic on the queue thread).
func TestHealReadGivenUpWithAnotherLanded(t *testing.T) {
	g := ParityGeometry{Level: Level5, Members: 4, Layout: LeftSymmetric, ChunkSectors: 8, MemberSectors: 64}
	const lost = 3
	w, _ := healWorld(t, g, 1, lost)
	var s uint64 = 1
	for ; ; s++ {
		if g.Stripe(s).P != lost && g.Stripe(s+1).P != lost {
			break
		}
	}
	x := -1
	for m := 0; m < g.Members; m++ {
		if m != lost && m != g.Stripe(s).P && m != g.Stripe(s+1).P {
			x = m
		}
	}
	e := w.execs[0]
	var now time.Duration
	e.Now = func() time.Duration { return now }
	e.MemberTimeout = 10 * time.Second
	w.abandon = true
	w.failHook = func(o pOp) bool { return o.io.Kind == IOWrite && !o.io.Log && int(o.io.Member) == x }
	nd := uint64(g.DataMembers())
	n := 2 * nd * g.ChunkSectors
	buf := make([]byte, n<<9)
	fill(buf, 42)
	e.Start(0, ReqWrite, s*nd*g.ChunkSectors, uint32(n), false, buf)
	// Everything up to the heal's read backs.
	for len(w.pending) > 0 && !e.inHealBuf(w.pending[0].data) {
		w.deliver(0)
	}
	if len(w.pending) != 2 {
		t.Fatalf("%d read backs pending", len(w.pending))
	}
	w.deliver(0) // one lands
	now = 11 * time.Second
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Tick giving up the other read back: %v", p)
		}
	}()
	e.Tick()
	w.settle()
	err, ok := w.done[0][0]
	if !ok || !errors.Is(err, ErrStripeUnhealed) {
		t.Fatalf("done %v %v", ok, err)
	}
	// The heal buffer is lent to the late read until it comes back, then
	// dropped (not a stripe buffer); the tag's next heal takes a new one.
	if len(e.lent) != 1 || !e.lent[0].heal || e.healBufs[0] != nil {
		t.Fatalf("after the give-up: lent %+v, tag's heal buffer kept %v", e.lent, e.healBufs[0] != nil)
	}
	free := e.slabs.freeBufs()
	w.landLate(t, 0xee)
	if len(e.lent) != 0 || e.slabs.freeBufs() != free {
		t.Fatalf("after the late read came back: lent %d, free stripe buffers %d (were %d)", len(e.lent), e.slabs.freeBufs(), free)
	}
}

// A pre-read given up in an earlier request of the tag (its slab lent,
// the late read still out) does not refuse a later heal of that tag: the
// heal uses this request's slab only (a review found the check looking at
// e.lent by tag).
func TestHealNotRefusedForOldLentSlab(t *testing.T) {
	g := ParityGeometry{Level: Level5, Members: 4, Layout: LeftSymmetric, ChunkSectors: 8, MemberSectors: 64}
	const lost = 3
	w, _ := healWorld(t, g, 1, lost)
	var st []uint64
	for s := range g.Stripes() {
		if m := g.Stripe(s); m.P != lost {
			st = append(st, s)
		}
	}
	e := w.execs[0]
	var now time.Duration
	e.Now = func() time.Duration { return now }
	e.MemberTimeout = 10 * time.Second
	w.abandon = true
	// Request 1: an RMW of 2 sectors of a data chunk of st[0]; its
	// pre-read of P hangs and is given up (P kept: ErrLastCopy).
	m0 := g.Stripe(st[0])
	x0 := int(m0.Data[0])
	if x0 == lost {
		x0 = int(m0.Data[1])
	}
	buf := make([]byte, 2<<9)
	fill(buf, 1)
	e.Start(0, ReqWrite, dataSector(g, st[0], x0), 2, false, buf)
	w.deliverExcept(m0.P)
	now = 11 * time.Second
	e.Tick()
	w.settle()
	if err := w.done[0][0]; !errors.Is(err, ErrLastCopy) || len(e.lent) == 0 {
		t.Fatalf("request 1: %v, lent %d", err, len(e.lent))
	}
	delete(w.done[0], 0)
	// Request 2, on another stripe, whose data write fails on kept x.
	m1 := g.Stripe(st[1])
	x := int(m1.Data[0])
	if x == lost {
		x = int(m1.Data[1])
	}
	w.failHook = func(o pOp) bool { return o.io.Kind == IOWrite && !o.io.Log && int(o.io.Member) == x }
	buf = make([]byte, 8<<9)
	fill(buf, 2)
	err := w.do(t, 0, ReqWrite, dataSector(g, st[1], x), 8, buf)
	if errors.Is(err, ErrStripeUnhealed) {
		t.Fatalf("heal refused (%v): a lent slab of an earlier request of the tag", err)
	}
}
