package engine

import "sync/atomic"

// ParityLogClock numbers a raid5/6 array's write-hole log entries and
// says which are dead (docs/raid56.md, the write hole). Every queue takes
// numbers from it and publishes the oldest number of its logged writes
// not yet durable; the checkpoint is the smallest of those (or the next
// number, with none), so every entry below it belongs to a durable
// write. Whoever persists the checkpoint in the log headers records it
// with SetPersisted; queues free their rings below Persisted. Lock-free:
// one atomic add per entry, one store per queue when its oldest changes.
type ParityLogClock struct {
	next      atomic.Uint64
	persisted atomic.Uint64
	// waiting counts the queues with writes waiting for ring space: while
	// any does, every queue asks for a checkpoint when its oldest entry
	// moves (the one a waiter needs may be another queue's).
	waiting atomic.Int64
	oldest  []atomic.Uint64 // per queue: 0 = no logged write out
	// stuck, when set, says why no checkpoint can be persisted (a log
	// header write failed on a member kept as the last copy): a write
	// that would wait for ring space fails with it instead.
	stuck atomic.Pointer[error]
}

// SetStuck records that no checkpoint can be persisted, and why (nil: a
// checkpoint was persisted again).
func (c *ParityLogClock) SetStuck(err error) {
	if err == nil {
		c.stuck.Store(nil)
		return
	}
	c.stuck.Store(&err)
}

// Stuck is SetStuck's error, or nil.
func (c *ParityLogClock) Stuck() error {
	if p := c.stuck.Load(); p != nil {
		return *p
	}
	return nil
}

// NewParityLogClock starts numbering at checkpoint (>= 1: what recovery
// left in the headers, past every entry on the members) for queues
// queues.
func NewParityLogClock(checkpoint uint64, queues int) *ParityLogClock {
	c := &ParityLogClock{oldest: make([]atomic.Uint64, queues)}
	c.next.Store(max(checkpoint, 1))
	c.persisted.Store(max(checkpoint, 1))
	return c
}

// Begin is called by queue q before it takes numbers while it has no
// logged write out: its oldest is at most the next number from now on,
// so no checkpoint computed meanwhile passes the numbers it takes.
func (c *ParityLogClock) Begin(q int) {
	c.oldest[q].Store(c.next.Load())
}

// Take returns the next entry number (Begin first, if queue q had no
// logged write out).
func (c *ParityLogClock) Take() uint64 { return c.next.Add(1) - 1 }

// TakeN returns the first of n consecutive entry numbers (as Take).
func (c *ParityLogClock) TakeN(n int) uint64 { return c.next.Add(uint64(n)) - uint64(n) }

// SetOldest publishes the oldest number of queue q's logged writes not
// yet durable (0: none).
func (c *ParityLogClock) SetOldest(q int, seq uint64) { c.oldest[q].Store(seq) }

// Checkpoint is the number below which every entry's write is durable.
func (c *ParityLogClock) Checkpoint() uint64 {
	cp := c.next.Load()
	for i := range c.oldest {
		if o := c.oldest[i].Load(); o != 0 && o < cp {
			cp = o
		}
	}
	return cp
}

// Persisted is the checkpoint the log headers hold; SetPersisted records
// a newer one once written (durably) to them.
func (c *ParityLogClock) Persisted() uint64 { return c.persisted.Load() }

// SetPersisted records checkpoint cp as durable in the headers (never
// moving back).
func (c *ParityLogClock) SetPersisted(cp uint64) {
	for {
		old := c.persisted.Load()
		if cp <= old || c.persisted.CompareAndSwap(old, cp) {
			return
		}
	}
}

// SetWaiting records that queue q has writes waiting for ring space
// (true) or no longer has (false); call it on each change.
func (c *ParityLogClock) SetWaiting(waiting bool) {
	if waiting {
		c.waiting.Add(1)
	} else {
		c.waiting.Add(-1)
	}
}

// Waiting reports whether some queue has writes waiting for ring space.
func (c *ParityLogClock) Waiting() bool { return c.waiting.Load() > 0 }
