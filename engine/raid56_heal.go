package engine

// A write that failed on a member kept as the last copy (a degraded
// raid5, a raid6 with two members lost): the request fails (ErrLastCopy),
// but the stripe must not be left with data and parity that disagree.
// Otherwise the chunks of the members lost, rebuilt from that parity,
// read back as something nobody wrote: the failed data write left the
// member's old (or part-written) rows under the new parity, or the failed
// parity write left the old parity under the new data. md records a bad
// block there (its reads then fail) or fails the array.
//
// Here the stripe is healed while the write still holds its stripes and
// its write-hole log entries, as a recovery replays an entry: the rows
// of each data write that failed on a kept member are read back, and
// each segment's parity is computed again from its entry (the parity of
// the slots it did not write, L_P/L_Q) and the written slots as they now
// are (read back, or the request's data where the write went through or
// the read back fails: the member's rows are then read around, from that
// parity, and read repair rewrites them with it), then written to the
// segment's parity members again. A crash before that ends replays the
// entry, which gives the same parity. Not healed (the request fails with
// ErrStripeUnhealed, counted in ParityStats.Unhealed, as md would record
// a bad block): a heal write or read back that fails too, a write without
// the log, and a request with an operation given up after the member
// timeout (its buffers may still be in use).

import (
	"fmt"
	"math/bits"
)

// ErrStripeUnhealed fails a raid5/6 write that failed on a member kept as
// the last copy and whose stripe could not be healed (see above): its
// stripe's parity and data may disagree until the rows are written again
// or resynced (a lost chunk rebuilt there may read as anything). It wraps
// ErrLastCopy; ParityStats.Unhealed counts them.
var ErrStripeUnhealed = fmt.Errorf("its stripe's parity could not be made to match its data again: %w", ErrLastCopy)

// healStart starts healing write tag's stripes after its data and parity
// writes (the parityWriting phase, which only writes reach, with r.err
// unset), some of which failed on members kept (r.lastCopy); false when
// it does not apply (the caller completes the request).
func (e *ParityExecutor) healStart(tag uint16) bool {
	r := &e.reqs[tag]
	heal := false
	for i := range r.segs {
		s := &r.segs[i]
		// (A segment that writes no parity has none to disagree.)
		heal = heal || s.writes&(1<<uint(s.m.P)|qbit(s.m.Q)) != 0 && e.segFailedKept(r, s, -1)
	}
	if !heal {
		return false
	}
	// No entry to heal from; or an operation of this plan was given up
	// after the member timeout: a data write of it may still land, and
	// the buffers it used may still be read or written.
	if e.logRing == nil || r.gaveUp {
		e.unhealed(r)
		return false
	}
	if n := int(r.sectors) << 9; len(e.healBufs[tag]) < n {
		e.healBufs[tag] = AlignedBuf(n) // the worst day only
	}
	r.healBuf = e.healBufs[tag]
	first := len(r.ios)
	r.healFrom, r.healFailed = first, false
	r.phase = parityHealReading // (segFailedKept stops at healFrom from now on)
	for i := range r.segs {
		s := &r.segs[i]
		if s.log == nil {
			continue
		}
		for mm := s.want & s.writes; mm != 0; mm &= mm - 1 {
			mem := bits.TrailingZeros64(mm)
			if e.segFailedKept(r, s, mem) {
				e.addIO(r, s, mem, IORead, e.healData(tag, s, mem))
			}
		}
	}
	e.submit(tag, first)
	return true
}

// healGiveUp keeps tag's heal buffer from reuse when d, the buffer of
// operation id given up after the member timeout, lies in the request's (a
// late read may still land there): it is lent (and referenced, the device
// may write it) until id comes back, and the next heal of tag takes
// another. It reports whether d is a heal's.
func (e *ParityExecutor) healGiveUp(tag uint16, id OpID, d []byte) bool {
	b := e.reqs[tag].healBuf
	if b == nil || !within(d, b) {
		return false
	}
	if e.healBufs[tag] != nil && within(d, e.healBufs[tag]) {
		e.lent = append(e.lent, lentSlab{tag: tag, op: id, buf: e.healBufs[tag], heal: true})
		e.healBufs[tag] = nil
		return true
	}
	for _, l := range e.lent {
		if l.tag == tag && l.heal && within(d, l.buf) {
			// Lent already (another read back of the same heal given up).
			e.lent = append(e.lent, lentSlab{tag: tag, op: id, buf: l.buf, heal: true})
			return true
		}
	}
	return true
}

// segFailedKept reports whether a write of segment s (to member mem; -1:
// any) failed in the write phase on a member that is still not faulty.
func (e *ParityExecutor) segFailedKept(r *parityReq, s *paritySeg, mem int) bool {
	st := e.arr.State()
	sector := s.stripe*e.geo.ChunkSectors + s.lo
	for i, io := range r.ios {
		if (r.phase == parityHealReading || r.phase == parityHealWriting) && i >= r.healFrom {
			break // the heal's own
		}
		if !r.failed[i] || io.Kind != IOWrite || io.Log || io.Sector != sector || io.Sectors != uint32(s.hi-s.lo) {
			continue
		}
		if (mem < 0 || int(io.Member) == mem) && s.writes&(1<<uint(io.Member)) != 0 && st.Members[io.Member].State != MemberFaulty {
			return true
		}
	}
	return false
}

// healReadOK reports whether the heal's read back of member mem's rows of
// segment s (issued from index first on) succeeded.
func (e *ParityExecutor) healReadOK(r *parityReq, s *paritySeg, mem, first int) bool {
	sector := s.stripe*e.geo.ChunkSectors + s.lo
	for i := first; i < len(r.ios); i++ {
		io := r.ios[i]
		if io.Kind == IORead && int(io.Member) == mem && io.Sector == sector {
			return !r.failed[i]
		}
	}
	return false
}

// healData is where the heal reads back data member mem's rows of
// segment s: the request's part for them, in healBuf.
func (e *ParityExecutor) healData(tag uint16, s *paritySeg, mem int) []byte {
	r := &e.reqs[tag]
	off := e.reqOff(r, s, mem)
	b := r.healBuf // (the tag's, unless a read back was given up since)
	return b[off<<9 : (off+s.hi-s.lo)<<9 : (off+s.hi-s.lo)<<9]
}

// healWrite computes the parity of the segments being healed from their
// entries and the rows read back, and writes it to their parity members.
func (e *ParityExecutor) healWrite(tag uint16) {
	r := &e.reqs[tag]
	first := len(r.ios)
	nd := e.geo.DataMembers()
	for i := range r.segs {
		s := &r.segs[i]
		if s.log == nil || !e.segFailedKept(r, s, -1) {
			continue
		}
		data := e.shards[:nd]
		for d := range nd {
			mem := int(s.m.Data[d])
			slot := s.m.Slot[mem]
			data[slot] = nil
			if s.logged&(1<<uint(slot)) != 0 {
				continue // in the entry's L_P/L_Q
			}
			data[slot] = e.reqData(r, s, mem)
			if !e.segFailedKept(r, s, mem) {
				continue
			}
			if e.healReadOK(r, s, mem, r.healFrom) {
				data[slot] = e.healData(tag, s, mem)
			} else {
				// Its rows unreadable now, the parity is made for the
				// request's data, which a read around them rebuilds (and
				// read repair writes there); but a later read that gets
				// through would find the member's own rows.
				r.healFailed = true
			}
		}
		var lp, lq []byte // (an entry that logs no slot has only its header)
		if s.logged != 0 {
			lp, lq = ParityLogPayload(s.log, s.hi-s.lo, e.par.Count())
		}
		log := [][]byte{lp, lq}[:e.par.Count()]
		out := s.par[:e.par.Count()]
		if err := e.par.RecoverParity(log, data, s.logged, out); err != nil {
			r.healFailed = true // (shapes checked when the entry was made)
			continue
		}
		pms := [2]int{s.m.P, s.m.Q}
		for k, pm := range pms[:e.par.Count()] {
			if pm >= 0 && s.writes&(1<<uint(pm)) != 0 && e.arr.State().Members[pm].State != MemberFaulty {
				e.addIO(r, s, pm, IOWrite, s.par[k])
			}
		}
	}
	r.healWritesFrom = first
	r.phase = parityHealWriting
	e.submit(tag, first)
}

// healDone finishes a heal once its writes are back.
func (e *ParityExecutor) healDone(tag uint16) {
	r := &e.reqs[tag]
	for i := r.healWritesFrom; i < len(r.ios); i++ {
		r.healFailed = r.healFailed || r.failed[i]
	}
	if r.healFailed {
		e.unhealed(r)
	} else {
		e.Stats.Healed.Add(1)
	}
	e.complete(tag)
}

// unhealed fails write r with ErrStripeUnhealed and counts it.
func (e *ParityExecutor) unhealed(r *parityReq) {
	r.err = ErrStripeUnhealed
	e.Stats.Unhealed.Add(1)
}
