package array

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Parity sync of a raid5/6 array: for each stripe whose sectors touch the
// bitmap regions given, read every member's chunk, compute P (and Q) from
// the data, and compare them with the P and Q on the members (check), or
// write them where they differ (resync, repair). One stripe at a time
// under the array's stripe lock, so user requests to other stripes go on
// and none sees a stripe half resynced. A region whose every stripe was
// resynced is ResyncDone: its parity is trusted from then on (RMW).
//
// Not yet scheduled by the syncer (resync of the regions dirty at
// assembly or filled by a first write, check and repair commands, speed
// limits): syncParityRegions is the step they will run.

// syncLockQueue is the stripe lock identity of parity sync work: no queue
// has this ID (queues are fewer than 4096). Its waiter bit, 63, is shared
// with queues 63, 127, ...: a wake-up meant for either reaches both, and
// each just tries again.
const syncLockQueue = 1<<16 - 1

// ParitySyncResult counts a parity sync's stripes and those whose parity
// differed from their data (md's mismatch_cnt counts sectors instead).
type ParitySyncResult struct {
	Stripes, Mismatches uint64
}

// errParityDegraded refuses a parity sync while a member is not in sync:
// the data of a lost member is known only through the parity itself.
var errParityDegraded = errors.New("raid5/6 parity cannot be checked or resynced while a member is not in sync")

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

// syncParityRegions checks (repair false) or resyncs (repair true) the
// parity of every stripe whose sectors touch bitmap regions first..last,
// and marks those regions resynced when repairing. Any goroutine but a
// queue's; blocks while queues hold the stripes.
func (a *Array) syncParityRegions(first, last int, repair bool) (ParitySyncResult, error) {
	var res ParitySyncResult
	g := a.Engine.Parity
	if g == nil || a.Bitmap == nil {
		return res, errors.New("not a raid5/6 array with a write-intent bitmap")
	}
	for _, m := range a.Engine.State().Members {
		if m.State != engine.MemberActive {
			return res, errParityDegraded
		}
	}
	par, err := engine.NewParity(g.DataMembers(), g.Level == engine.Level6)
	if err != nil {
		return res, err
	}
	lock := a.parityStripeLock()
	cb := int(g.ChunkSectors << 9)
	buf, free, err := alignedBuf((g.Members + 2) * cb)
	if err != nil {
		return res, err
	}
	defer free()
	chunk := func(i int) []byte { return buf[i*cb : (i+1)*cb : (i+1)*cb] }
	newPar := [][]byte{chunk(g.Members), chunk(g.Members + 1)}[:par.Count()]
	data := make([][]byte, g.DataMembers())
	per := g.ChunkSectors * uint64(g.DataMembers())
	rs := a.Bitmap.Geometry().RegionSectors
	size := g.ArraySectors()
	written := make([]bool, g.Members)
	for r := first; r <= last; r++ {
		lo, hi := uint64(r)*rs, min(uint64(r+1)*rs, size)
		if lo >= hi {
			continue
		}
		for s := lo / per; s <= (hi-1)/per; s++ {
			differs, err := a.syncParityStripe(lock, par, s, chunk, data, newPar, repair, written)
			if err != nil {
				return res, fmt.Errorf("stripe %d: %w", s, err)
			}
			res.Stripes++
			if differs {
				res.Mismatches++
			}
		}
		if repair {
			// The parity written durable before the region may be
			// cleared: a crash must not find it clean with old parity.
			for i, w := range written {
				if !w {
					continue
				}
				if err := a.Members[i].Flush(); err != nil {
					return res, fmt.Errorf("flush member %d: %w", i, err)
				}
				written[i] = false
			}
			a.Bitmap.ResyncDone(r, r)
		}
	}
	return res, nil
}

// syncParityStripe checks or resyncs stripe s under the stripe lock,
// reporting whether its parity differed from its data.
func (a *Array) syncParityStripe(lock *engine.StripeLock, par *engine.Parity, s uint64, chunk func(int) []byte,
	data, newPar [][]byte, repair bool, written []bool) (bool, error) {
	g := a.Engine.Parity
	token := engine.StripeToken(syncLockQueue, 0)
	for {
		ok, retry := lock.TryLock(s, s, token, syncLockQueue)
		if ok {
			break
		}
		if !retry {
			<-a.syncWake
		}
	}
	defer lock.Unlock(s, s, token)
	m := g.Stripe(s)
	off := int64(a.dataOffset + s*g.ChunkSectors<<9)
	for i := range g.Members {
		if err := a.Members[i].ReadAt(chunk(i), off); err != nil {
			return false, fmt.Errorf("read member %d: %w", i, err)
		}
		if sl := m.Slot[i]; sl >= 0 {
			data[sl] = chunk(i)
		}
	}
	if err := par.Compute(data, newPar); err != nil {
		return false, err
	}
	differs := false
	pms := [2]int{m.P, m.Q}
	for k, pm := range pms[:par.Count()] {
		if bytes.Equal(newPar[k], chunk(pm)) {
			continue
		}
		differs = true
		if repair {
			if err := a.Members[pm].WriteAt(newPar[k], off); err != nil {
				return true, fmt.Errorf("write member %d: %w", pm, err)
			}
			written[pm] = true
		}
	}
	return differs, nil
}
