package engine

import (
	"math/bits"
	"sync/atomic"
)

// stripeLockSlots is the size of a StripeLock's table. Stripe s uses slot
// s mod stripeLockSlots: stripes that far apart share a slot and exclude
// each other too (waiting a little more, never less).
const stripeLockSlots = 4096

// stripeSlot is one entry, alone on its cache line: its holder's token (0
// when free) and the queues waiting for it (by bit, queue mod 64).
type stripeSlot struct {
	holder  atomic.Uint64
	waiters atomic.Uint64
	_       [48]byte
}

// StripeLock gives one request at a time, across every queue of a parity
// array, the stripes it writes (and those it reads degraded): a request
// computing parity must never see another's half-written stripe. It never
// blocks: TryLock takes every stripe of a range or none, and a request
// that did not get them waits (parked by its queue) for a wake-up of its
// queue, which comes when the stripe it failed on is released. Taking all
// or none, there is no lock order and no deadlock. A wake-up is per queue:
// the queue retries every request it parked on the lock.
//
// A failed TryLock marks its queue as waiting on the slot it failed on and
// then looks at that slot again; Unlock frees its slots and then reads
// their waiters. With Go's sequentially consistent atomics one of the two
// sees the other: the waiter sees the slot free and retries at once
// (TryLock reports that), or Unlock sees the waiter and wakes its queue.
// So no wake-up is lost, and only the queues waiting on the released slots
// are woken (waiters on other stripes do not wake each other).
//
// Not fair: a request over many stripes can lose again and again to
// requests over fewer; parity requests span one or a few stripes.
// Safe for concurrent use by any number of queues; queue q is waiter bit
// q mod 64, and wake(b) must wake every queue with that bit.
type StripeLock struct {
	slots [stripeLockSlots]stripeSlot
	wake  func(bit int)
}

// stripeLockRace, when set (tests only), runs right after a failed
// compare-and-swap, before the slots taken are let go and the waiter is
// marked: where other queues' TryLock and Unlock can slip in.
var stripeLockRace func()

// NewStripeLock returns a StripeLock that calls wake(bit) (which must not
// block: an eventfd write, say) for each waiter bit on released slots.
func NewStripeLock(wake func(bit int)) *StripeLock {
	if wake == nil {
		wake = func(int) {}
	}
	return &StripeLock{wake: wake}
}

// StripeToken identifies a lock holder: a request (queue, tag). Never 0.
func StripeToken(queue int, tag uint16) uint64 {
	return uint64(uint32(queue))<<16 | uint64(tag) | 1<<63
}

// slotRange is the slots of stripes [first, last], as a start and a count
// (every slot when the range covers the table).
func slotRange(first, last uint64) (start, n uint64) {
	if last-first >= stripeLockSlots-1 {
		return 0, stripeLockSlots
	}
	return first % stripeLockSlots, last - first + 1
}

// TryLock takes stripes [first, last] for token, all of them or none. On
// failure the queue is marked waiting on the stripe that was held, and
// retry says whether that stripe became free meanwhile (try again at once)
// or whether the queue will be woken when it is released.
func (l *StripeLock) TryLock(first, last uint64, token uint64, queue int) (ok, retry bool) {
	start, n := slotRange(first, last)
	for i := range n {
		s := &l.slots[(start+i)%stripeLockSlots]
		if s.holder.CompareAndSwap(0, token) {
			continue
		}
		if stripeLockRace != nil {
			stripeLockRace()
		}
		// Let go of what was taken: waiters on those slots may have
		// come meanwhile.
		var wake uint64
		for j := range i {
			r := &l.slots[(start+j)%stripeLockSlots]
			r.holder.Store(0)
			wake |= r.waiters.Swap(0)
		}
		l.wakeBits(wake)
		s.waiters.Or(1 << uint(queue%64))
		return false, s.holder.Load() == 0
	}
	return true, false
}

// Unlock releases stripes [first, last] taken by token and wakes the
// queues waiting on them.
func (l *StripeLock) Unlock(first, last uint64, token uint64) {
	start, n := slotRange(first, last)
	var wake uint64
	for i := range n {
		s := &l.slots[(start+i)%stripeLockSlots]
		if s.holder.Load() != token {
			panic("engine: StripeLock.Unlock of a stripe the token does not hold")
		}
		s.holder.Store(0)
		if s.waiters.Load() != 0 {
			wake |= s.waiters.Swap(0)
		}
	}
	l.wakeBits(wake)
}

func (l *StripeLock) wakeBits(w uint64) {
	for ; w != 0; w &= w - 1 {
		l.wake(bits.TrailingZeros64(w))
	}
}
