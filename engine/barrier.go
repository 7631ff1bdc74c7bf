package engine

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

// barrierBuckets is the size of a Barrier's table of write counts. Bucket
// number b (array sector >> bucketShift) uses entry b mod barrierBuckets, so
// nearby buckets never share an entry and far ones (barrierBuckets buckets
// apart) do.
const barrierBuckets = 1024

// barrierSlot is one entry of the table: the number of writes in flight in
// the buckets that map to it, alone on its cache line so that queue threads
// writing to different places do not contend.
type barrierSlot struct {
	n atomic.Int64
	_ [56]byte
}

// barrierSpan is a raised range, as bucket numbers [first, last].
type barrierSpan struct{ first, last uint64 }

// Barrier keeps user writes and one background sync worker (rebuild,
// resync, check, repair) off each other's ranges, in array-sector space. A
// sync step raises its range, waits for the writes already in it to finish,
// reads and writes its copies, and lowers it; a write that arrives while an
// overlapping range is raised does not enter and is retried after wake.
//
// Writers (queue threads) never block and take no lock: Enter counts the
// write in its buckets and then looks at the raised range; the sync worker
// publishes the range and then waits for the counts of its buckets to drain.
// With Go's sequentially consistent atomics one of the two always sees the
// other (Dekker's handshake): either the writer sees the raised range and
// backs out, or the sync worker sees the writer's count and waits for it.
//
// Exclusion is by table entry, not by exact range: a write whose buckets
// share a table entry with the raised buckets (barrierBuckets buckets apart)
// also waits. That costs a little extra waiting, never a missed exclusion,
// and guarantees the raised entries drain so the sync worker cannot starve.
//
// Enter and Exit are safe from any number of goroutines. Raise and Lower
// belong to one sync goroutine at a time (one job per array).
type Barrier struct {
	slots   [barrierBuckets]barrierSlot
	shift   uint
	raised  atomic.Pointer[barrierSpan]
	waiters atomic.Bool // some Enter failed since the last Lower
	wake    func()
}

// NewBarrier returns a Barrier with buckets of 1<<bucketShift sectors. wake
// is called by Lower when writes failed to enter while the range was
// raised, so that their queues retry them; it must not block (for example:
// a non-blocking send on a channel, or an eventfd write).
func NewBarrier(bucketShift uint, wake func()) *Barrier {
	if wake == nil {
		wake = func() {}
	}
	return &Barrier{shift: min(bucketShift, 63), wake: wake}
}

// buckets returns the bucket numbers [first, last] of a range (at least
// one sector).
func (b *Barrier) buckets(sector, sectors uint64) (first, last uint64) {
	end := sector + max(sectors, 1) - 1
	if end < sector {
		end = ^uint64(0)
	}
	return sector >> b.shift, end >> b.shift
}

// collides reports whether the table entries of buckets [f1, l1] and
// [f2, l2] intersect.
func collides(f1, l1, f2, l2 uint64) bool {
	const mask = barrierBuckets - 1
	if l1-f1 >= mask || l2-f2 >= mask {
		return true
	}
	// Two arcs of the circle of entries: they meet iff one's start lies
	// inside the other.
	return (f2-f1)&mask <= l1-f1 || (f1-f2)&mask <= l2-f2
}

func (b *Barrier) add(first, last uint64, d int64) {
	if last-first >= barrierBuckets {
		last = first + barrierBuckets - 1 // every entry once
	}
	for k := first; ; k++ {
		b.slots[k&(barrierBuckets-1)].n.Add(d)
		if k == last {
			return
		}
	}
}

// Enter asks to write array sectors [sector, sector+sectors). It returns
// true if the write may go ahead now; the caller must then call Exit with
// the same range once the write has completed on every member. It returns
// false, having entered nothing, while an overlapping range is raised: the
// caller parks the write and retries it after the Barrier calls wake.
//
// A write must Enter before it loads the ArrayState it plans with: a sync
// step that raises after a member became a rebuild target then either sees
// the write (and waits for it, having copied nothing yet) or the write sees
// the new state and writes the target too.
//
// Enter never blocks, takes no lock and does not allocate.
func (b *Barrier) Enter(sector uint64, sectors uint32) bool {
	first, last := b.buckets(sector, uint64(sectors))
	for {
		b.add(first, last, 1)
		r := b.raised.Load()
		if r == nil || !collides(first, last, r.first, r.last) {
			return true
		}
		b.add(first, last, -1)
		// Ask Lower for a wake, then look again: if the range is still
		// raised, its Lower comes after our request and will see it.
		b.waiters.Store(true)
		if r = b.raised.Load(); r != nil && collides(first, last, r.first, r.last) {
			return false
		}
		// Lowered in between: try again rather than wait for a wake that
		// may already have happened.
	}
}

// Exit ends a write that entered with Enter(sector, sectors).
func (b *Barrier) Exit(sector uint64, sectors uint32) {
	first, last := b.buckets(sector, uint64(sectors))
	b.add(first, last, -1)
}

// Raise excludes writes from array sectors [sector, sector+sectors): from
// now on Enter of an overlapping range fails, and Raise returns once every
// overlapping write that had entered has exited. It polls, yielding and then
// sleeping briefly. If ctx ends first it lowers the range (waking parked
// writers) and returns ctx's error. Only one range is raised at a time:
// Raise must not be called again before Lower.
func (b *Barrier) Raise(ctx context.Context, sector, sectors uint64) error {
	first, last := b.buckets(sector, sectors)
	b.raised.Store(&barrierSpan{first: first, last: last})
	if last-first >= barrierBuckets {
		last = first + barrierBuckets - 1
	}
	for k := first; ; k++ {
		slot := &b.slots[k&(barrierBuckets-1)]
		for spin := 0; slot.n.Load() != 0; spin++ {
			if err := ctx.Err(); err != nil {
				b.Lower()
				return err
			}
			switch {
			case spin < 16:
				runtime.Gosched()
			case spin < 64:
				time.Sleep(20 * time.Microsecond)
			default:
				time.Sleep(200 * time.Microsecond)
			}
		}
		if k == last {
			return nil
		}
	}
}

// Lower ends the raised range and, if writes were refused meanwhile, calls
// wake so that they are retried.
func (b *Barrier) Lower() {
	b.raised.Store(nil)
	if b.waiters.Swap(false) {
		b.wake()
	}
}
