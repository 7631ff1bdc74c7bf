package engine

import (
	"bytes"
	"testing"
)

// Reads take no stripe lock when every chunk they want is read from its
// member as it is: one on a stripe a write of another queue holds is
// issued at once and reads the right data. A read with a chunk to
// reconstruct (its member lost, or its read failed) takes the lock, and
// waits for the write (its rows may be changing).
func TestRaid56DirectReads(t *testing.T) {
	g := raid56Geo(Level5, 4) // 3 data chunks of 8 sectors a stripe
	w := newPWorld(t, g, 2, 1, 64<<10)
	ref := make([]byte, 24<<9)
	fill(ref, 3)
	if err := w.do(t, 0, ReqWrite, 0, 24, ref); err != nil {
		t.Fatal(err)
	}
	a := make([]byte, 4<<9)
	fill(a, 7)
	e0, e1 := w.execs[0], w.execs[1]
	// Queue 0's write to chunk 0 holds stripe 0; queue 1 reads chunk 1.
	e0.Start(0, ReqWrite, 0, 4, false, a)
	if len(w.pending) == 0 {
		t.Fatal("the write issued nothing")
	}
	got := make([]byte, 8<<9)
	e1.Start(0, ReqRead, 8, 8, false, got)
	issued := 0
	for _, o := range w.pending {
		if o.q == 1 {
			issued++
		}
	}
	if e1.Parked() != 0 || issued != 1 || e1.Stats.StripeWaits.Load() != 0 {
		t.Fatalf("a read of a whole member chunk waited for the stripe: parked %d, issued %d", e1.Parked(), issued)
	}
	w.settle()
	if err, ok := w.done[1][0]; !ok || err != nil || !bytes.Equal(got, ref[8<<9:16<<9]) || e1.Stats.DirectReads.Load() != 1 {
		t.Fatalf("direct read: done %v, %v, right %v, direct reads %d", ok, err, bytes.Equal(got, ref[8<<9:16<<9]), e1.Stats.DirectReads.Load())
	}
	copy(ref, a)
	delete(w.done[0], 0)
	delete(w.done[1], 0)

	// Chunk 1's member fails the read: the read is planned again under
	// the lock (the write holds it: it waits), reconstructed from the
	// others once the write is done.
	_, _, mem, _ := g.LocateData(8)
	e0.Start(0, ReqWrite, 0, 4, false, a)
	w.failHook = func(o pOp) bool { return o.q == 1 && o.io.Kind == IORead && int(o.io.Member) == mem }
	clear(got)
	e1.Start(0, ReqRead, 8, 8, false, got)
	for i := 0; i < len(w.pending); {
		if w.pending[i].q == 1 {
			w.deliver(i) // the failed read
			continue
		}
		i++
	}
	w.persist()
	if e1.Parked() != 1 {
		t.Fatalf("the read to reconstruct did not wait for the stripe the write holds (parked %d)", e1.Parked())
	}
	w.failHook = nil
	w.settle()
	if err, ok := w.done[1][0]; !ok || err != nil || !bytes.Equal(got, ref[8<<9:16<<9]) {
		t.Fatalf("reconstructed read: done %v, %v, right %v", ok, err, bytes.Equal(got, ref[8<<9:16<<9]))
	}
	if e1.Stats.StripeWaits.Load() != 1 || e1.Stats.ReconstructReads.Load() != 1 || e1.Stats.DirectReads.Load() != 1 {
		t.Fatalf("stripe waits %d, reconstruct reads %d, direct reads %d; want 1, 1, 1", e1.Stats.StripeWaits.Load(), e1.Stats.ReconstructReads.Load(), e1.Stats.DirectReads.Load())
	}
	w.parityConsistent(t)
	w.lockFree(t)
}
