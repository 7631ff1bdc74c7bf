package bitmap

import (
	"testing"
	"time"
)

// Unclear: a batch writing regions clean that a member failed (its flush)
// must not count for that member. Its regions are dirty again, counted and
// reported so (a re-add copies them), and the next batch writes their
// blocks and the header again, then makes them durable-dirty.
func TestUnclearDirtiesTheBatchClears(t *testing.T) {
	const d = time.Second
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{ClearDelay: d, MaxClearDelay: d})
	c := &orderChecker{t: t, b: b, a: a}
	c.tick(0)
	c.write(5)
	c.write(2000)
	c.tick(d / 4)
	bt := b.Tick(2 * d) // (the header of events cleared 1 is on the members)
	if bt == nil || len(bt.clears) != 2 || b.State(5) != Clean || b.State(2000) != Clean {
		t.Fatalf("the tick's batch clears %v, regions 5 and 2000 %v %v", bt.clears, b.State(5), b.State(2000))
	}
	if !b.Unclear(bt) {
		t.Fatal("Unclear of a batch that clears reports nothing done")
	}
	var rel []Waiter
	a.commit(b, bt, &rel) // on the member that did not fail
	g := b.Geometry()
	for _, r := range []int{5, 2000} {
		if b.State(r) != Dirty || !b.Dirty(r) {
			t.Fatalf("region %d after Unclear: %v, Dirty %v", r, b.State(r), b.Dirty(r))
		}
	}
	if got := b.Stats().DirtyRegions; got != 2 {
		t.Fatalf("dirty regions %d, want 2", got)
	}
	next := b.Prepare()
	ix := blockIndices(next)
	if len(ix) != 3 || ix[0] != 0 {
		t.Fatalf("next batch writes blocks %v, want the header and the two regions' blocks", ix)
	}
	c.drain(next)
	for _, r := range []int{5, 2000} {
		if a.diskState(t, &g, 0, r) != Dirty {
			t.Fatalf("region %d not written dirty again", r)
		}
		// Durable-dirty again: a write to it does not wait.
		if !b.StartWrite(r, r, Waiter(r)) {
			t.Fatalf("region %d not durable-dirty after the batch", r)
		}
		b.EndWrite(r, r)
	}
	// A batch with no clears: nothing to undo.
	b.SetEvents(b.Events() + 1)
	hb := b.Prepare()
	if b.Unclear(hb) {
		t.Fatal("Unclear of a header-only batch reports clears")
	}
	c.drain(hb)
}
