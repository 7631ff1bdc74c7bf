package engine

import (
	"math/bits"
	"sync/atomic"
)

// stripeLockSlots is the size of a StripeLock's table. Stripe s uses slot
// s mod stripeLockSlots: stripes that far apart share a slot and exclude
// each other too (waiting a little more, never less).
const stripeLockSlots = 4096

// stripeSlot is one entry: 0 when free, else its holder's token, alone on
// its cache line.
type stripeSlot struct {
	holder atomic.Uint64
	_      [56]byte
}

// StripeLock gives one request at a time, across every queue of a parity
// array, the stripes it writes (and those it reads degraded): a request
// computing parity must never see another's half-written stripe. It never
// blocks: TryLock takes every stripe of a range or none, and a request
// that did not get them waits (parked by its queue) for the wake-up that
// Unlock sends to every queue with a waiter. Taking all or none, there is
// no lock order and no deadlock.
//
// A failed TryLock marks its queue as waiting and then looks at the slot
// again; Unlock frees the slots and then reads the waiting queues. With
// Go's sequentially consistent atomics one of the two sees the other: the
// waiter sees the slot free and retries at once (TryLock reports that), or
// Unlock sees the waiter and wakes its queue. So no wake-up is lost.
//
// Safe for concurrent use by up to 64 queues (queue ids 0..63).
type StripeLock struct {
	slots   [stripeLockSlots]stripeSlot
	waiters atomic.Uint64 // queues with a request waiting, by bit
	wake    func(queue int)
}

// NewStripeLock returns a StripeLock that calls wake(queue) (which must
// not block: an eventfd write, say) for each queue with a waiting request
// when stripes are unlocked.
func NewStripeLock(wake func(queue int)) *StripeLock {
	if wake == nil {
		wake = func(int) {}
	}
	return &StripeLock{wake: wake}
}

// StripeToken identifies a lock holder: a request (queue, tag). Never 0.
func StripeToken(queue int, tag uint16) uint64 { return uint64(queue)<<16 | uint64(tag) | 1<<63 }

// slotRange is the slots of stripes [first, last], as a start and a count
// (every slot when the range covers the table).
func slotRange(first, last uint64) (start, n uint64) {
	if last-first >= stripeLockSlots-1 {
		return 0, stripeLockSlots
	}
	return first % stripeLockSlots, last - first + 1
}

// TryLock takes stripes [first, last] for token, all of them or none. On
// failure the queue is marked waiting, and retry says whether the stripe
// that was held became free meanwhile (try again at once) or whether the
// queue will be woken when stripes are unlocked.
func (l *StripeLock) TryLock(first, last uint64, token uint64, queue int) (ok, retry bool) {
	start, n := slotRange(first, last)
	for i := range n {
		s := &l.slots[(start+i)%stripeLockSlots]
		if s.holder.CompareAndSwap(0, token) {
			continue
		}
		for j := range i {
			l.slots[(start+j)%stripeLockSlots].holder.Store(0)
		}
		if i > 0 {
			l.wakeWaiters() // someone may have failed on the slots just released
		}
		l.waiters.Or(1 << uint(queue))
		return false, s.holder.Load() == 0
	}
	return true, false
}

// Unlock releases stripes [first, last] taken by token and wakes the
// queues with waiting requests.
func (l *StripeLock) Unlock(first, last uint64, token uint64) {
	start, n := slotRange(first, last)
	for i := range n {
		s := &l.slots[(start+i)%stripeLockSlots]
		if s.holder.Load() != token {
			panic("engine: StripeLock.Unlock of a stripe the token does not hold")
		}
		s.holder.Store(0)
	}
	l.wakeWaiters()
}

func (l *StripeLock) wakeWaiters() {
	if l.waiters.Load() == 0 {
		return
	}
	for w := l.waiters.Swap(0); w != 0; w &= w - 1 {
		l.wake(bits.TrailingZeros64(w))
	}
}
