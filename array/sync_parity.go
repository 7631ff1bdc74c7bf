package array

import (
	"context"
	"fmt"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// The syncer on a raid5/6 array. Its jobs (resync/parity.go) are the
// copies' jobs, scheduled the same way (sync.go): the resync of the bitmap
// regions dirty at assembly or filled by a first write, check and repair,
// the rebuild of a member put into a role; with the same speed limits,
// busy detection, checkpoints and status. What differs is here: the
// barrier a job raises over a stripe is the array's stripe lock (the
// requests' own, so no request is inside a stripe the job reads or
// writes); a resync, check or repair needs fewer members out of sync
// than the parity covers (md: a raid5 with one member out, a raid6 with
// two, is recovered, not resynced, and check and repair are refused; a
// raid6 with one out is worked on around it: resync/parity.go); a check
// counts only stripes whose every region is trusted.

// syncLockQueue is the stripe lock identity of parity sync work: no queue
// has this ID (queues are fewer than 4096). Its waiter bit, 63, is shared
// with queues 63, 127, ...: a wake-up meant for either reaches both, and
// each just tries again.
const syncLockQueue = 1<<16 - 1

// parityStripeLock is the array's stripe lock, made at first use.
func (a *Array) parityStripeLock() *engine.StripeLock {
	a.qmu.Lock()
	defer a.qmu.Unlock()
	if a.stripeLock == nil {
		a.stripeLock = engine.NewStripeLock(a.wakeStripeWaiters)
		a.syncWake = make(chan struct{}, 1)
	}
	return a.stripeLock
}

// stripeBarrier is a parity array's resync.Barrier: Raise takes the
// stripe lock of the stripes an array range touches (waiting for the
// requests holding them), Lower releases them. One user at a time (the
// array's exclusiveBarrier: the syncer's job or read repair), so one
// range is held at a time.
type stripeBarrier struct {
	a           *Array
	first, last uint64 // stripes held
}

func (b *stripeBarrier) Raise(ctx context.Context, sector, sectors uint64) error {
	g := b.a.Engine.Parity
	per := g.ChunkSectors * uint64(g.DataMembers())
	lock := b.a.parityStripeLock()
	first, last := sector/per, (sector+max(sectors, 1)-1)/per
	token := engine.StripeToken(syncLockQueue, 0)
	for {
		ok, retry := lock.TryLock(first, last, token, syncLockQueue)
		if ok {
			b.first, b.last = first, last
			return nil
		}
		if retry {
			continue
		}
		select {
		case <-b.a.syncWake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *stripeBarrier) Lower() {
	b.a.stripeLock.Unlock(b.first, b.last, engine.StripeToken(syncLockQueue, 0))
}

// parityDegraded reports whether a parity array has as many members out
// of sync (faulty, missing or rebuilding) as its parity covers: a raid5
// with one, a raid6 with two (md's mddev->degraded >= max_degraded). Its
// resync waits (the rebuild that ends it starts the resync: nextJob), its
// check and repair are refused. A raid6 with one member out is resynced,
// checked and repaired around it.
func (a *Array) parityDegraded() bool {
	if a.Engine.Parity == nil {
		return false
	}
	n := 0
	for _, m := range a.Engine.State().Members {
		if m.State != engine.MemberActive {
			n++
		}
	}
	return n >= a.Engine.Parity.ParityMembers()
}

// checkParityJob refuses a check or repair of a parity array degraded as
// far as its parity covers (parityDegraded), as md does: a lost member's
// data lives only in the parity a repair would rewrite.
func (a *Array) checkParityJob(k resync.Kind) error {
	if a.parityDegraded() {
		return fmt.Errorf("cannot %s a degraded %s array: %w", k, a.Engine.Level(), resync.ErrDegraded)
	}
	return nil
}

// neededParityChecked is a parity check's Need: every region the stripes
// of the range touch is trusted (written, no resync pending); without a
// bitmap, the range is below the full resync's position. Only then
// is the parity meant to be right; elsewhere the pending resync (or the
// first write) will recompute it.
func (a *Array) neededParityChecked(sector, sectors uint64) bool {
	if a.Bitmap == nil {
		// Below the full resync's position (all of it when none is
		// pending).
		return sector+sectors <= a.sync.from.Load()
	}
	first, last := a.Bitmap.Regions(sector, sectors)
	for r := first; r <= last; r++ {
		if !a.checkedRegion(r) {
			return false
		}
	}
	return true
}
