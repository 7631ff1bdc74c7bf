package engine

import (
	"bytes"
	"testing"
	"time"
)

// A direct read given up after the member timeout while a write of
// another queue holds its stripe: planned again under the lock (parked),
// woken, answered right in the new buffer; lock free at the end.
func TestRaid56DirectReadGivenUpParks(t *testing.T) {
	for _, level := range []Level{Level5, Level6} {
		g := raid56Geo(level, 5)
		w := newPWorld(t, g, 2, 1, 64<<10)
		n := uint32(g.ArraySectors())
		ref := make([]byte, n<<9)
		fill(ref, 3)
		if err := w.do(t, 0, ReqWrite, 0, n, ref); err != nil {
			t.Fatal(err)
		}
		var now time.Duration
		e0, e1 := w.execs[0], w.execs[1]
		e1.Now = func() time.Duration { return now }
		e1.MemberTimeout = 10 * time.Second
		w.abandon = true
		per := g.ChunkSectors * uint64(g.DataMembers())
		a := make([]byte, 4<<9)
		fill(a, 7)
		e0.Start(0, ReqWrite, 0, 4, false, a) // holds stripe 0
		if len(w.pending) == 0 {
			t.Fatal("write issued nothing")
		}
		got := make([]byte, per<<9)
		e1.Start(0, ReqRead, 0, uint32(per), false, got) // whole stripe 0, direct
		if e1.Parked() != 0 {
			t.Fatal("not direct")
		}
		_, _, mem, _ := g.LocateData(g.ChunkSectors)
		// deliver everything of queue 1 but its read of mem
		for i := 0; i < len(w.pending); {
			if o := w.pending[i]; o.q == 1 && int(o.io.Member) != mem {
				w.deliver(i)
				continue
			}
			i++
		}
		now = 11 * time.Second
		e1.Tick()
		if len(w.late) != 1 {
			t.Fatalf("late %d", len(w.late))
		}
		w.persist()
		if e1.Parked() != 1 {
			t.Fatalf("read to reconstruct not parked behind the write: parked %d", e1.Parked())
		}
		w.landLate(t, 0xee)
		w.settle()
		copy(ref, a)
		err, ok := w.done[1][0]
		buf := got
		if w.rebuf != nil && w.rebuf[1][0] != nil {
			buf = w.rebuf[1][0]
		}
		if !ok || err != nil || !bytes.Equal(buf, ref[:per<<9]) {
			t.Fatalf("%v: done %v %v right %v", level, ok, err, bytes.Equal(buf, ref[:per<<9]))
		}
		w.lockFree(t)
	}
}

// DirectReads counts reads served without the stripe lock: not one that
// was reconstructed under the lock after a read error, nor one that
// failed (requests that fail count nowhere).
func TestRaid56DirectReadsCountsServedOnly(t *testing.T) {
	g := raid56Geo(Level5, 3)
	w := newPWorld(t, g, 1, 1, 64<<10)
	data := make([]byte, 8<<9)
	fill(data, 11)
	if err := w.do(t, 0, ReqWrite, 0, 8, data); err != nil {
		t.Fatal(err)
	}
	_, _, mem, _ := g.LocateData(0)
	// A read error, not the last copy: reconstructed under the lock.
	w.failHook = func(o pOp) bool { return o.io.Kind == IORead && int(o.io.Member) == mem }
	got := make([]byte, 8<<9)
	if err := w.do(t, 0, ReqRead, 0, 8, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v", err)
	}
	w.failHook = nil
	e := w.execs[0]
	if e.Stats.ReconstructReads.Load() != 1 {
		t.Fatalf("reconstruct reads %d", e.Stats.ReconstructReads.Load())
	}
	if n := e.Stats.DirectReads.Load(); n != 0 {
		t.Errorf("a read reconstructed under the stripe lock counted as direct: DirectReads %d", n)
	}
	// Now degraded: a read error on the last copy fails the read.
	w2 := newPWorld(t, g, 1, 1, 64<<10)
	if err := w2.do(t, 0, ReqWrite, 0, 8, data); err != nil {
		t.Fatal(err)
	}
	w2.arr.Fail((mem + 1) % 3)
	w2.asked = w2.arr.State().Gen
	w2.persist()
	w2.failHook = func(o pOp) bool { return o.io.Kind == IORead && int(o.io.Member) == mem }
	if err := w2.do(t, 0, ReqRead, 0, 8, got); err == nil {
		t.Fatal("read of a failing last copy succeeded")
	}
	if n := w2.execs[0].Stats.DirectReads.Load(); n != 0 {
		t.Errorf("a failed read counted as a direct read served: DirectReads %d", n)
	}
}
