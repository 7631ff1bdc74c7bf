package bitmap

import (
	"testing"
	"time"
)

// headerFailedOnKeptMember: region 5 written in generation 2 and idle; the
// header batch saying events cleared 2 (the first tick's, which the clear
// waits for) taken by member 0 and failed on member 1, kept as the last
// copy (Failed). Clock ticks of clearDelay.
func headerFailedOnKeptMember(t *testing.T) (*Bitmap, *fakeArray, *orderChecker) {
	t.Helper()
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{ClearDelay: clearDelay, MaxClearDelay: clearDelay})
	c := &orderChecker{t: t, b: b, a: a}
	c.tick(0)
	c.write(5)
	b.SetEvents(2)
	c.drain(b.Prepare())
	c.tick(clearDelay / 4) // sees the write
	bt := b.Tick(2 * clearDelay)
	if bt == nil || len(bt.Blocks) != 1 || bt.Blocks[0].Index != 0 {
		t.Fatalf("first tick: want the header only, got %v", blockIndices(bt))
	}
	a.write(0, bt.Blocks[0])
	b.Failed(bt, nil, nil)
	return b, a, c
}

const clearDelay = time.Second

// A header batch carrying a new events cleared that fails on a member kept
// in sync does not cover clears: they wait for a header saying that events
// cleared to be durable on every member, and no block writing a region
// clean goes out in the same batch as (or before) that header's retry.
func TestFailedHeaderDoesNotCoverClears(t *testing.T) {
	b, _, c := headerFailedOnKeptMember(t)
	if h := c.header(1); h.EventsCleared != 1 {
		t.Fatalf("member 1 header %+v", h)
	}
	if !b.ClearBlocked() {
		t.Errorf("ClearBlocked false after the header saying events cleared 2 failed: clears no longer wait for it")
	}
	// The next tick: region 5 must not be written clean while member 1's
	// header says events cleared 1 (orderChecker fails on it).
	c.tick(3 * clearDelay)
	if b.State(5) == Clean && c.header(1).EventsCleared < 2 {
		t.Fatalf("region 5 cleared though member 1's header says events cleared %d", c.header(1).EventsCleared)
	}
}

// As TestFailedHeaderDoesNotCoverClears, with a full rewrite under way
// (the header held back until the data blocks are written): the clean
// block would go out in a batch of its own, leaving member 1 with region 5
// clean under a header whose events cleared (1) does not cover the clear
// (generation 2), md's events_cleared rule broken on that copy.
func TestFailedHeaderClearDuringRewrite(t *testing.T) {
	b, a, c := headerFailedOnKeptMember(t)
	b.RewriteAll() // e.g. a member re-added meanwhile: header goes last
	bt := b.Tick(3 * clearDelay)
	g := b.Geometry()
	for _, blk := range bt.Blocks {
		if blk.Index == 0 {
			t.Fatalf("header in the rewrite's first batch")
		}
		a.write(1, blk) // member 1 takes the data blocks
		a.write(0, blk)
	}
	b.Committed(bt, nil)
	if s := a.diskState(t, &g, 1, 5); s == Clean {
		t.Fatalf("member 1: region 5 clean on disk in generation 2, its header says events cleared %d", c.header(1).EventsCleared)
	}
}

// Stats.DurableEvents is "the events value of the last committed header":
// a header batch that Failed is not committed.
func TestFailedHeaderNotDurableEvents(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{})
	b.SetEvents(2)
	bt := b.Prepare()
	if bt == nil || bt.Events != 2 {
		t.Fatalf("no header batch")
	}
	a.write(0, bt.Blocks[0])
	b.Failed(bt, nil, nil)
	if got := b.Stats().DurableEvents; got != 1 {
		t.Fatalf("DurableEvents %d after the header of events 2 failed, want 1", got)
	}
}
