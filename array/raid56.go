package array

import (
	"fmt"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// raid5 and raid6 at the array level. The engine has their superblock,
// assembly rules, geometry, planners and request executor; this file
// builds a parity array's engine state and queue executors, and
// sync_parity.go runs the syncer's parity jobs on it; raid56_logrun.go and
// raid56_recover.go run the write-hole log; management (fail, remove,
// re-add, replace, spares) knows it, grow refuses it.

// refuseParity refuses what a raid5/6 array does not support (write-mostly
// members), before anything is written; what names the array or request
// in the message.
func refuseParity(spec CreateSpec, level engine.Level, what string) error {
	if !engine.IsParityLevel(level) {
		return nil
	}
	if len(spec.WriteMostly) > 0 {
		return fmt.Errorf("%s is %s: write-mostly members are not supported for it", what, level)
	}
	return nil
}

// A parity array without the write-intent bitmap has its parity built
// in full by the syncer's resync, as md does: when created (unless
// AssumeClean: members known zeroed, whose parity is zeroes) and after an
// unclean stop, from the position a stopped one had reached (initSync).
// Until the resync passes a stripe its parity is untrusted
// (parityUnsyncedStripe). A dirty degraded one starts as with a bitmap:
// when its write-hole log replays every entry (recoverParityLog), else
// refused (ErrDirtyDegraded) unless forced.

// engineArray is the engine array a superblock describes (levels 0, 1,
// 10 and, for parity, NewParityArray), with the smallest member data size
// among sbs.
func engineArray(sb *engine.Superblock, sbs []*engine.Superblock) (*engine.Array, error) {
	g := geometryOf(sb, sbs)
	if engine.IsParityLevel(g.Level) {
		return engine.NewParityArray(engine.ParityGeometryOf(sb, g.MemberSectors))
	}
	return engine.NewArray(g)
}

// ArraySectorsOf is the size, in sectors, of the array a member's
// superblock describes (with that member's data size), as assembly would
// serve it: what the array's bitmap header must record (examine-bitmap).
func ArraySectorsOf(sb *engine.Superblock) (uint64, error) {
	ea, err := engineArray(sb, []*engine.Superblock{sb})
	if err != nil {
		return 0, err
	}
	return arraySectors(ea), nil
}

// arraySectors is the size of the array ea serves.
func arraySectors(ea *engine.Array) uint64 {
	if ea.Parity != nil {
		return ea.Parity.ArraySectors()
	}
	return ea.Geo.ArraySectors()
}

// maxArraySectors is the size of the largest array spec makes of n
// members of memberSectors each (no data offset), for the bitmap's size.
func maxArraySectors(spec CreateSpec, n int, memberSectors uint64) uint64 {
	if engine.IsParityLevel(spec.Level) {
		pg := engine.ParityGeometry{Level: spec.Level, Members: n, Layout: spec.ParityLayout,
			ChunkSectors: spec.ChunkSectors, MemberSectors: memberSectors}
		return pg.ArraySectors()
	}
	upper := engine.Geometry{Level: spec.Level, Members: n, Layout: spec.Layout,
		ChunkSectors: spec.ChunkSectors, MemberSectors: memberSectors}
	return upper.ArraySectors()
}

// parityCovered reports whether parity array ea can serve every sector:
// no more members out of sync than its parity covers.
func parityCovered(ea *engine.Array) bool {
	lost := 0
	for _, m := range ea.State().Members {
		if m.State != engine.MemberActive {
			lost++
		}
	}
	return lost <= ea.Parity.ParityMembers()
}

// parityUntrusted reports whether stripe s of a parity array may have
// garbage or stale parity: some bitmap region its sectors touch was never
// written or needs sync (first written since, or dirty at assembly). The
// planner then never updates the old parity (RMW). Any queue thread.
func (a *Array) parityUntrusted(s uint64) bool {
	g := a.Engine.Parity
	per := g.ChunkSectors * uint64(g.DataMembers())
	first, last := a.Bitmap.Regions(s*per, per)
	for r := first; r <= last; r++ {
		if !a.Bitmap.Written(r) || a.Bitmap.NeedsSync(r) {
			return true
		}
	}
	return false
}

// parityUnsyncedStripe is the Untrusted of a parity array without a
// bitmap: stripe s is not wholly below the full resync's position (the
// parity may be garbage there, or stale after an unclean stop). Any
// queue thread.
func (a *Array) parityUnsyncedStripe(s uint64) bool {
	g := a.Engine.Parity
	per := g.ChunkSectors * uint64(g.DataMembers())
	return (s+1)*per > a.sync.from.Load()
}

// parityRunner is a queue's raid5/6 executor.
type parityRunner struct{ *engine.ParityExecutor }

// newParityRunner makes the executor of queue handler h on ring q.
func (a *Array) newParityRunner(h *queue, q ring) requestRunner {
	e, err := engine.NewParityExecutor(a.Engine, h, a.parityStripeLock(), q.ID(), q.Depth(), q.MaxIOBytes())
	if err != nil {
		panic(fmt.Sprintf("array: raid5/6 executor: %v", err)) // the engine array is a parity one
	}
	start := time.Now()
	e.Now = func() time.Duration { return q.Now().Sub(start) } // the loop's clock, as newExecutor's
	e.MemberTimeout = a.MemberTimeout
	e.OpDone = h.opDone
	e.Wake = q.Wake // (a stripe buffer given back to a request waiting for one)
	if bm := a.Bitmap; bm != nil {
		e.Intent = bm
		e.Token = uint32(q.ID())
		e.Untrusted = a.parityUntrusted
	} else if a.sync != nil {
		e.Untrusted = a.parityUnsyncedStripe
	}
	if a.logBytes > 0 {
		ring, pl, err := a.parityLogRing(q.ID(), q.MaxIOBytes())
		if err != nil {
			panic(fmt.Sprintf("array: raid5/6 write-hole log: %v", err)) // NewQueue checked it
		}
		// (A queue started again: what its predecessor held has ended.)
		pl.clock.SetOldest(q.ID(), 0)
		e.EnableLog(ring, pl.clock, a.logUUID, pl.wantCheckpoint, q.MaxIOBytes())
	}
	if a.paritySerialBuffers {
		e.SerializeBuffers()
	}
	if a.repairs != nil {
		e.ReadRepair = func(member int, sector uint64, sectors uint32) {
			a.requestRepair(sector, sectors, 1<<uint(member))
		}
		e.MemberError = a.countReadErr
		e.MemberReadOK = a.parityReadOK
	}
	return parityRunner{e}
}

// wakeStripeWaiters wakes the queues of stripe lock waiter bit (queue ID
// mod 64): the lock released a stripe one of them waits for. Never blocks.
func (a *Array) wakeStripeWaiters(bit int) {
	a.qmu.Lock()
	defer a.qmu.Unlock()
	for id, h := range a.queues {
		if id%64 == bit {
			h.q.Wake()
		}
	}
	if bit == syncLockQueue%64 {
		select {
		case a.syncWake <- struct{}{}:
		default:
		}
	}
}

// parityParams are the device parameters of a parity array: io_min the
// chunk, io_opt the full stripe when it is a power of two (ublk takes a
// shift), no chunk_sectors (the block layer would split full-stripe
// writes into per-chunk ones), no DISCARD or WRITE_ZEROES (the executor
// refuses them).
func (a *Array) parityParams() ublk.Params {
	g := a.Engine.Parity
	var p ublk.Params
	p.Types = ublk.ParamTypeBasic
	b := &p.Basic
	lbs, pbs := 512, 512
	a.mu.Lock()
	for _, m := range a.Members {
		if m != nil {
			lbs, pbs = max(lbs, m.LogicalBlock), max(pbs, m.PhysicalBlock)
		}
	}
	a.mu.Unlock()
	b.LogicalBSShift, b.PhysicalBSShift = log2(uint64(lbs)), log2(uint64(pbs))
	chunk := g.ChunkSectors << 9
	b.IOMinShift = log2(max(chunk, uint64(pbs)))
	if w := chunk * uint64(g.DataMembers()); w&(w-1) == 0 {
		b.IOOptShift = log2(w)
	}
	b.DevSectors = g.ArraySectors()
	b.Attrs |= ublk.AttrVolatileCache | ublk.AttrFUA
	return p
}
