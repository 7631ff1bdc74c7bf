package engine

// The parity executor's write-hole log phase (EnableLog; docs/raid56.md,
// the write hole): between a write's pre-reads and its data and parity
// writes, each segment whose parity is written gets an entry, durable on
// the stripe's parity members written before anything of the segment is.

import (
	"fmt"
	"math/bits"
)

// logPrepare decides segment s's entry and gives it its block in the
// stripe buffer: none when no parity member is written (DataOnly: there
// is no parity to be wrong); X (logged) is the data slots the write does
// not write and the written ones whose members cannot be read at the
// stripe (lost, or rebuilding below it).
func (e *ParityExecutor) logPrepare(r *parityReq, s *paritySeg) {
	s.log = nil
	pbits := 1<<uint(s.m.P) | qbit(s.m.Q)
	if s.writes&pbits == 0 {
		return
	}
	members := uint64(1)<<uint(e.geo.Members) - 1
	data := members &^ pbits
	// Written chunks whose members cannot be read at the stripe (lost,
	// or rebuilding and not rebuilt past it: a recovery does not read
	// them back) count as lost. One that can be read must stay out of X:
	// a recovery reads it as the crash left it, and a parity built for
	// its new data would not match that. As the plan saw them (the
	// members it writes), which readabilityMoved checked is still so.
	st := r.planSt
	end := (s.stripe + 1) * e.geo.ChunkSectors
	notInSync := uint64(0)
	for mm := s.want; mm != 0; mm &= mm - 1 {
		if m := bits.TrailingZeros64(mm); !st.Members[m].readable(end) {
			notInSync |= 1 << uint(m)
		}
	}
	s.written = s.m.SlotMask(s.want)
	s.unlogged = 0
	s.logged = s.m.SlotMask(data&^s.want | s.want&^s.writes | notInSync)
	ent := ParityLogEntry{RowLo: s.lo, RowHi: s.hi, Logged: s.logged, Parity: e.par.Count()}
	// Whole pages, page-aligned in the stripe buffer (direct I/O).
	r.used = int(roundUp(uint64(r.used), ParityLogHeaderSize))
	s.log = r.alloc(int(roundUp(uint64(ent.Size()), ParityLogHeaderSize)))
}

// readabilityMoved reports whether a member write r writes in some
// segment can be read at that stripe now and could not when r was planned,
// or the other way round. A member failed since (in memory, perhaps not
// yet durably) would go into X with its new data while its write is still
// issued, and may not land: a crash before the failure is durable brings
// the member back in sync with its old rows, and the entry's parity would
// not match them. Planned again, the write is held until the failure is
// durable and then leaves the member out.
func (e *ParityExecutor) readabilityMoved(r *parityReq) bool {
	st := e.arr.State()
	if st == r.planSt {
		return false
	}
	for i := range r.segs {
		s := &r.segs[i]
		end := (s.stripe + 1) * e.geo.ChunkSectors
		for mm := s.want; mm != 0; mm &= mm - 1 {
			m := bits.TrailingZeros64(mm)
			if st.Members[m].readable(end) != r.planSt.Members[m].readable(end) {
				return true
			}
		}
	}
	return false
}

// logPayload returns the places of segment s's L_P and L_Q.
func (e *ParityExecutor) logPayload(s *paritySeg) [][]byte {
	lp, lq := ParityLogPayload(s.log, s.hi-s.lo, e.par.Count())
	e.shards[MaxMembers], e.shards[MaxMembers+1] = lp, lq
	return e.shards[MaxMembers : MaxMembers+e.par.Count()]
}

// logRMW computes an RMW segment's payload before its update: over X
// (the slots not written, all readable or not), the old parity plus the
// parity of the written slots' old data (both pre-read); plus, for a
// written slot in X (its member rebuilding below the stripe), the parity
// of its new data. A parity member not read (lost) leaves its part zero
// and marked unlogged: it is not written either, and a recovery must not
// write that zero's parity to it should it be back by then.
func (e *ParityExecutor) logRMW(r *parityReq, s *paritySeg) error {
	if s.log == nil || s.logged == 0 {
		return nil
	}
	log := e.logPayload(s)
	pms := [2]int{s.m.P, s.m.Q}
	for k := range log {
		if s.reads&(1<<uint(pms[k])) != 0 {
			copy(log[k], s.chunk[pms[k]])
		} else {
			clear(log[k])
			s.unlogged |= 1 << uint(k)
		}
	}
	for mm := s.want; mm != 0; mm &= mm - 1 {
		mem := bits.TrailingZeros64(mm)
		slot := int(s.m.Slot[mem])
		if err := e.par.Update(s.chunk[mem], slot, log); err != nil {
			return err
		}
		if s.logged&(1<<uint(slot)) != 0 {
			// Written, in X (its member rebuilding below the stripe):
			// its new data.
			if err := e.par.Update(e.reqData(r, s, mem), slot, log); err != nil {
				return err
			}
		}
	}
	return nil
}

// logFromData computes an RCW or Reconstruct segment's payload after
// compute (the old chunks read or rebuilt): the parity of X's chunks at
// their intended values (old data for the slots not written, the new for
// the written ones of lost members).
func (e *ParityExecutor) logFromData(r *parityReq, s *paritySeg) error {
	if s.log == nil || s.logged == 0 {
		return nil
	}
	nd := e.geo.DataMembers()
	data := e.shards[:nd]
	for d := range nd {
		mem := int(s.m.Data[d])
		slot := s.m.Slot[mem]
		data[slot] = nil
		if s.logged&(1<<uint(slot)) == 0 {
			continue
		}
		if s.want&(1<<uint(mem)) != 0 {
			data[slot] = e.reqData(r, s, mem)
		} else {
			data[slot] = s.chunk[mem]
		}
	}
	return e.par.LogParity(data, s.logged, e.logPayload(s))
}

// logIssue takes ring space and numbers for the write's entries and
// writes them, or parks the write until a checkpoint frees space.
func (e *ParityExecutor) logIssue(tag uint16) {
	r := &e.reqs[tag]
	r.phase = parityLogWait
	ok, err := e.logTake(r)
	if err != nil {
		r.err = err
		e.complete(tag)
		return
	}
	if !ok {
		if err := e.logClock.Stuck(); err != nil {
			// No checkpoint can free the ring: fail the write rather
			// than wait for ever (nothing of it was written).
			r.err = err
			e.complete(tag)
			return
		}
		if len(e.logWaitq) == 0 {
			e.logClock.SetWaiting(true)
		}
		e.logWaitq = append(e.logWaitq, tag)
		e.Stats.LogWaits.Add(1)
		if e.logWait != nil {
			e.logWait()
		}
		return
	}
	e.logSubmit(tag)
}

// logTake reserves the write's entries in the ring (all or none) and
// numbers and encodes them.
func (e *ParityExecutor) logTake(r *parityReq) (bool, error) {
	e.logRing.Free(e.logClock.Persisted())
	r.logSizes = r.logSizes[:0]
	for i := range r.segs {
		if s := &r.segs[i]; s.log != nil {
			r.logSizes = append(r.logSizes, len(s.log))
		}
	}
	if len(r.logSizes) == 0 {
		return true, nil
	}
	if !e.logRing.Fits(r.logSizes) {
		return false, fmt.Errorf("raid5/6: the write-hole log ring cannot hold a write's %d entries", len(r.logSizes))
	}
	if e.logOut == 0 {
		e.logClock.Begin(e.queue)
	}
	seq0 := e.logClock.TakeN(len(r.logSizes))
	if !e.logRing.TakeAll(seq0, r.logSizes, r.logOffs) {
		if e.logOut == 0 {
			e.logClock.SetOldest(e.queue, 0)
		}
		return false, nil
	}
	r.logFirst = seq0
	e.Stats.LogEntries.Add(uint64(len(r.logSizes)))
	if e.logWait != nil && e.logRing.Used()*2 > e.logRing.Size() {
		e.logWait() // (half full: a checkpoint before it fills)
	}
	if e.logOut == 0 {
		e.logOldest = seq0
		e.logClock.SetOldest(e.queue, seq0)
	}
	e.logOut++
	n := 0
	for i := range r.segs {
		s := &r.segs[i]
		if s.log == nil {
			continue
		}
		ent := ParityLogEntry{Array: e.logUUID, Seq: seq0 + uint64(n), Stripe: s.stripe, RowLo: s.lo, RowHi: s.hi,
			Logged: s.logged, Written: s.written, Parity: e.par.Count(), Unlogged: s.unlogged}
		ent.P, ent.Q = ParityLogPayload(s.log, ent.payloadRows(), ent.Parity)
		if _, err := ent.Encode(s.log, e.geo); err != nil {
			return false, err
		}
		n++
	}
	return true, nil
}

// logSubmit writes the write's entries (taken) to the parity members of
// their stripes that the write writes.
func (e *ParityExecutor) logSubmit(tag uint16) {
	r := &e.reqs[tag]
	first := len(r.ios)
	n := 0
	for i := range r.segs {
		s := &r.segs[i]
		if s.log == nil {
			continue
		}
		off := r.logOffs[n]
		n++
		for _, pm := range [2]int{s.m.P, s.m.Q} {
			if pm < 0 || s.writes&(1<<uint(pm)) == 0 {
				continue
			}
			r.ios = append(r.ios, MemberIO{Member: int32(pm), Kind: IOWrite, FUA: true, Log: true,
				Sector: off >> 9, Sectors: uint32(len(s.log) >> 9)})
			r.data = append(r.data, s.log)
		}
	}
	r.phase = parityLogging
	e.submit(tag, first)
}

// logRelease ends the write's hold on its entries (finished: its data
// and parity writes are durable, or never issued), publishing the
// queue's oldest entry still held.
func (e *ParityExecutor) logRelease(r *parityReq) {
	if r.logFirst == 0 {
		return
	}
	first := r.logFirst
	r.logFirst = 0
	e.logOut--
	switch {
	case e.logOut == 0:
		e.logOldest = 0
		e.logClock.SetOldest(e.queue, 0)
	case first == e.logOldest:
		oldest := uint64(0)
		for i := range e.reqs {
			if f := e.reqs[i].logFirst; f != 0 && (oldest == 0 || f < oldest) {
				oldest = f
			}
		}
		e.logOldest = oldest
		e.logClock.SetOldest(e.queue, oldest)
	}
	if e.logWait != nil && e.logClock.Waiting() {
		e.logWait() // (the checkpoint may have moved: a write of some queue waits for it)
	}
}

// retryLogWait gives the writes waiting for ring space another try, in
// their order, after freeing what the persisted checkpoint allows.
func (e *ParityExecutor) retryLogWait() {
	for len(e.logWaitq) > 0 {
		tag := e.logWaitq[0]
		r := &e.reqs[tag]
		ok, err := e.logTake(r)
		if err == nil && !ok {
			if err = e.logClock.Stuck(); err == nil {
				if e.logWait != nil {
					e.logWait()
				}
				return
			}
			// (No checkpoint can free the ring: the waiting writes
			// fail, below.)
		}
		e.logWaitq = append(e.logWaitq[:0], e.logWaitq[1:]...)
		if len(e.logWaitq) == 0 {
			e.logClock.SetWaiting(false)
		}
		if err != nil {
			r.err = err
			e.complete(tag)
			continue
		}
		e.logSubmit(tag)
	}
}
