package array

import (
	"fmt"
	"math/bits"

	"github.com/ublk-raid/ublk-raid/engine"
)

// recoverParityLog replays a raid5/6 array's write-hole log at assembly,
// before anything else is written (docs/raid56.md, the write hole): the
// live entries (numbered at or above the largest checkpoint a member's
// log header holds; the areas are read a window at a time and only these
// kept) of every member in sync or rebuilding, once each,
// oldest first; each gives its rows' parity from the entry and the
// stripe's data outside the entry's X as it is on disk, written to the
// stripe's parity members that can take it. Then every member is flushed
// (by the synchronous writes) and each present member's header gets a
// checkpoint past every entry seen, so none is replayed again; but not
// while a role is out (missing, or failed here): then the checkpoint
// waits for the next superblock write (holdLog). An entry whose data
// outside X cannot be read (a member lost with the crash) keeps the
// parity on disk, or on raid6 P on disk with Q recomputed to match (see
// run below), so that X is still rebuilt right; one whose X cannot be
// rebuilt so (more chunks lost than that covers) is left: it
// returns how many were replayed and how many could not be. A dirty
// assembly that was not forced is refused (ErrDirtyDegraded) when an
// entry is left, before anything is written.
func (a *Array) recoverParityLog(asm *engine.Assembly) (replayed, left int, err error) {
	sb := asm.Freshest
	g := *a.Engine.Parity
	if sb.LogBytes == 0 {
		return 0, 0, nil
	}
	stripeEnd := func(s uint64) uint64 { return (s + 1) * g.ChunkSectors }
	writable := func(m int) bool {
		ms := a.Engine.State().Members[m]
		return a.Members[m] != nil && (ms.State == engine.MemberActive || ms.State == engine.MemberRebuilding)
	}
	// The log areas read: not a member a forced assembly put back, whose
	// entries and checkpoint are the other side's (split brain), nor one
	// it put in sync as it is (Promoted), whose entries are from before
	// it left the array (emptied by assemble).
	trusted := func(m int) bool { return writable(m) && !asm.Roles[m].Forced && !asm.Roles[m].Promoted }
	readableAll := func(m int) bool {
		return a.Members[m] != nil && a.Engine.State().Members[m].State == engine.MemberActive
	}
	// The headers first: the largest checkpoint says which entries are
	// live. Then each member's area is scanned one window at a time,
	// keeping only its live entries (an area is up to 64 MiB).
	checkpoint := uint64(1)
	headers, torn := 0, 0 // headers that decoded; that did not
	failed := false       // a member failed here: no checkpoint is written past the entries
	failRead := func(r int, err error) error {
		// Its entries unseen, the numbers from here could repeat
		// theirs: it is failed (not the last copy: then the assembly
		// fails).
		st, _, _ := a.Engine.FailRedundant(r)
		if st.Members[r].State == engine.MemberActive {
			return fmt.Errorf("%s: reading its write-hole log area: %w", a.Members[r].Path, err)
		}
		a.Warnings = append(a.Warnings, fmt.Sprintf("write-hole log: %s failed: reading its log area: %v", a.Members[r].Path, err))
		failed = true
		return nil
	}
	for r, m := range a.Members {
		if !trusted(r) {
			continue
		}
		hb, err := m.ReadBlock(int64(sb.LogOffset), engine.ParityLogHeaderSize)
		if err != nil {
			if err := failRead(r, err); err != nil {
				return 0, 0, err
			}
			continue
		}
		if h, err := engine.DecodeParityLogHeader(hb, sb.ArrayUUID); err == nil {
			checkpoint = max(checkpoint, h.Checkpoint)
			headers++
		} else {
			torn++
		}
	}
	// No header decodes (each torn or damaged: the checkpointer writes
	// them in two rounds, so a power cut tears one round's at most): the
	// entries still in the areas cannot be told live or dead, and a dead
	// one replayed puts back a parity older writes computed (its stripe's
	// later entry may be gone from another queue's ring). None is
	// replayed when nothing needs it: a clean array had no write in
	// flight, and one with every member in sync has its dirty stripes'
	// parity recomputed from the data by the resync. A dirty degraded
	// array is refused unless forced (then every entry found is
	// replayed, oldest first).
	// (A header of checkpoint 1 tells nothing when another is torn: it
	// is a new array's, or that of a device put into a role since, which
	// got one then: the torn one may have held the checkpoint.)
	noHeader := headers == 0 || torn > 0 && checkpoint == 1
	// Degraded: as assembled, or by a member failed here (its log area
	// unreadable), whose chunks would be rebuilt from the parity too.
	degraded := func() bool { return asm.Degraded || failed }
	refuseNoHeader := func() error {
		out := 0
		for _, m := range a.Engine.State().Members {
			if m.State != engine.MemberActive {
				out++
			}
		}
		return engine.DirtyDegradedError(asm, out,
			"no header of its write-hole log can be read, so which of its entries to replay is unknown")
	}
	if noHeader && !asm.Clean && degraded() && !asm.Forced {
		return 0, 0, refuseNoHeader()
	}
	buf, free, err := alignedBuf(engine.ParityLogScanWindow(g, int(sb.LogBytes), parityLogScanWindow))
	if err != nil {
		return 0, 0, err
	}
	defer free()
	var all []engine.ParityLogEntry
	for r, m := range a.Members {
		if !trusted(r) {
			continue
		}
		read := func(off int64, b []byte) error { return m.ReadAt(b, int64(sb.LogOffset)+off) }
		live := func(e *engine.ParityLogEntry) bool { return e.Seq >= checkpoint }
		found, err := engine.ScanParityLogFrom(read, int(sb.LogBytes), buf, g, sb.ArrayUUID, live)
		if err != nil {
			if err := failRead(r, err); err != nil {
				return 0, 0, err
			}
			continue
		}
		all = append(all, found...)
	}
	if noHeader && !asm.Clean && degraded() && !asm.Forced {
		return 0, 0, refuseNoHeader() // a member failed by the scan
	}
	skipReplay := noHeader && (asm.Clean || !degraded())
	par, err := engine.NewParity(g.DataMembers(), g.Level == engine.Level6)
	if err != nil {
		return 0, 0, err
	}
	next := checkpoint
	live := engine.ParityLogReplay(all, checkpoint)
	for _, e := range live {
		next = max(next, e.Seq+1)
	}
	if skipReplay {
		a.Warnings = append(a.Warnings, fmt.Sprintf("write-hole log: no header of it could be read; its %d entries are not replayed (the array was clean, or is in sync and its resync recomputes the parity)", len(live)))
		live = nil
	}
	// Dirty, and an entry cannot be replayed: a member it needs is
	// missing (the assembly was let through on the log's strength:
	// Assembly.DirtyDegraded) or is not rebuilt that far. md's refusal
	// of a dirty degraded array, before anything is written.
	refuse := func(left int) error {
		notInSync := 0
		for r := range a.Members {
			if !readableAll(r) {
				notInSync++
			}
		}
		return engine.DirtyDegradedError(asm, notInSync, fmt.Sprintf(
			"%d entries of its write-hole log cannot be replayed: a chunk their writes wrote is on a member that is missing, failed a read here, or is not rebuilt that far", left))
	}
	// The entries, newest first, one at a time and in pieces of
	// rows, so that memory is bounded by a piece whatever the log holds
	// (a full area of header-only full-chunk entries would otherwise
	// ask for a chunk of parity per 4 KiB entry). Each entry's parity
	// is computed from the data as the crash left it (a replay writes
	// parity only, which no entry reads) and written to the rows of its
	// stripe's parity members that no newer entry replayed has written:
	// what writing all of them oldest first would leave. An entry whose
	// data outside X cannot be read, or whose rows meet those of a newer
	// entry left, is left: an older entry describes the stripe before
	// the newer write, and replayed without it would put back the parity
	// of data that write has changed since (its own rows stay as the
	// crash left them: the write hole, with a member lost with the
	// crash). A data member failing a read here is unreadable from then
	// on. A dirty assembly that was not forced is read through once
	// first, writing nothing, and refused if an entry is left.
	overlaps := func(l []rowRange, lo, hi uint64) bool {
		for _, b := range l {
			if b.lo < hi && lo < b.hi {
				return true
			}
		}
		return false
	}
	pieceSectors := min(g.ChunkSectors, replayPieceSectors)
	nd := g.DataMembers()
	pbuf := int(pieceSectors) << 9
	dataBufs := make([][]byte, nd)
	for i := range dataBufs {
		b, free, err := alignedBuf(pbuf)
		if err != nil {
			return 0, 0, err
		}
		defer free()
		dataBufs[i] = b
	}
	outBufs := [][]byte{make([]byte, pbuf), make([]byte, pbuf)}
	pDiskBuf, freeP, err := alignedBuf(pbuf)
	if err != nil {
		return 0, 0, err
	}
	defer freeP()
	bad := uint64(0) // members that failed a read
	// Read as the states were before any replay write: a member failed
	// by a write of it here still holds the data its role stands for,
	// which the parity of the other members must match (its rebuild
	// takes it from them).
	st0 := a.Engine.State()
	readable := func(m int, s uint64) bool {
		ms := st0.Members[m]
		return a.Members[m] != nil && (ms.State == engine.MemberActive || ms.State == engine.MemberRebuilding && ms.RebuildOffset >= stripeEnd(s))
	}
	data := make([][]byte, nd)
	// run goes through the entries; without write it only reads what
	// they need (which entries are left, and so whether a dirty assembly
	// is refused, is known before anything is written).
	run := func(write bool) error {
		replayed, left = 0, 0
		blocked := map[uint64][]rowRange{}    // by stripe: rows of entries left
		covered := map[[2]uint64][]rowRange{} // by stripe and parity k: rows written
		for i := len(live) - 1; i >= 0; i-- {
			e := live[i]
			sm := g.Stripe(e.Stripe)
			skip := overlaps(blocked[e.Stripe], e.RowLo, e.RowHi)
			gone := func(m int) bool { return bad&(1<<uint(m)) != 0 || !readable(m, e.Stripe) }
			// The chunks lost with the crash: written ones (lostW, by
			// slot), and chunks of X.
			lostW, lostX := uint64(0), 0
			for m := range g.Members {
				if slot := sm.Slot[m]; slot >= 0 && gone(m) {
					if e.Logged&(1<<uint(slot)) == 0 {
						lostW |= 1 << uint(slot)
					} else {
						lostX++
					}
				}
			}
			// A written chunk lost (its member failed by the write, or
			// lost with the crash) may hold anything, as md's PPL allows
			// for the written part of a stripe; the entry's X must still
			// be rebuilt right. With no chunk of X lost, the parity on
			// disk stays (settled: X is read directly, and the lost chunk
			// is whatever that parity says). On raid6 with one written
			// chunk lost, P on disk is kept (the chunk is what P implies)
			// and Q computed from it, the log and the data: then a lost
			// chunk of X, too, is rebuilt right from the two (keepP).
			settle, keepP := false, -1
			if lostW != 0 && !skip {
				pOK := func(m, k int) bool {
					return !gone(m) && writable(m) && e.Unlogged&(1<<uint(k)) == 0
				}
				switch {
				case e.Parity == 2 && bits.OnesCount64(lostW) == 1 && pOK(sm.P, 0) && pOK(sm.Q, 1):
					keepP = bits.TrailingZeros64(lostW)
				case lostX == 0:
					settle = true
				default:
					skip = true
				}
			}
			for lo := e.RowLo; lo < e.RowHi && !skip && !settle; lo += pieceSectors {
				hi := min(e.RowHi, lo+pieceSectors)
				n := int(hi-lo) << 9
				off := int64(a.dataOffset + (e.Stripe*g.ChunkSectors+lo)<<9)
				for m := range g.Members {
					slot := sm.Slot[m]
					if slot < 0 {
						continue
					}
					data[slot] = nil
					if (e.Logged|lostW)&(1<<uint(slot)) != 0 {
						continue
					}
					data[slot] = dataBufs[slot][:n]
					if err := a.Members[m].ReadAt(data[slot], off); err != nil {
						a.Warnings = append(a.Warnings, fmt.Sprintf("write-hole log: %s: reading stripe %d for the replay: %v", a.Members[m].Path, e.Stripe, err))
						bad |= 1 << uint(m)
						skip = true
						break
					}
				}
				if keepP >= 0 {
					// P on disk, which keepP keeps: read in the reading
					// pass too, so that a member failing it refuses an
					// assembly not forced before anything is written.
					if err := a.Members[sm.P].ReadAt(pDiskBuf[:n], off); err != nil {
						a.Warnings = append(a.Warnings, fmt.Sprintf("write-hole log: %s: reading stripe %d for the replay: %v", a.Members[sm.P].Path, e.Stripe, err))
						bad |= 1 << uint(sm.P)
						skip = true
					}
				}
				if skip {
					break
				}
				if !write {
					continue
				}
				log := [][]byte{nil, nil}[:e.Parity]
				if e.Logged != 0 {
					pl, ql := int(lo-e.RowLo)<<9, int(hi-e.RowLo)<<9
					log[0] = e.P[pl:ql]
					if e.Parity == 2 {
						log[1] = e.Q[pl:ql]
					}
				}
				out := [][]byte{outBufs[0][:n], outBufs[1][:n]}[:e.Parity]
				if keepP >= 0 {
					if err := par.RecoverParityKeepingP(log, data, e.Logged, keepP, pDiskBuf[:n], out); err != nil {
						return fmt.Errorf("write-hole log entry %d (stripe %d): %w", e.Seq, e.Stripe, err)
					}
				} else if err := par.RecoverParity(log, data, e.Logged, out); err != nil {
					return fmt.Errorf("write-hole log entry %d (stripe %d): %w", e.Seq, e.Stripe, err)
				}
				for k, pm := range []int{sm.P, sm.Q}[:e.Parity] {
					if !writable(pm) || e.Unlogged&(1<<uint(k)) != 0 || keepP >= 0 && k == 0 {
						// (keepP: P stays as it is.)
						// (Unlogged: the member was out when the write was
						// made, which neither read nor wrote it; back
						// since, rebuilt or rebuilding, it has its own
						// parity.)
						continue
					}
					for _, w := range subtractRows(covered[[2]uint64{e.Stripe, uint64(k)}], lo, hi) {
						b := out[k][(w[0]-lo)<<9 : (w[1]-lo)<<9]
						woff := off + int64(w[0]-lo)<<9
						if err := a.Members[pm].WriteBlockSync(woff, b); err != nil {
							// The member is failed, as a write error fails it
							// when served (but not the last copy: then the
							// assembly fails); the entries stay live (no
							// checkpoint is written past them) until that is
							// durable.
							st, _, _ := a.Engine.FailRedundant(pm)
							if st.Members[pm].State == engine.MemberActive {
								return fmt.Errorf("write-hole log entry %d: parity of stripe %d on %s: %w", e.Seq, e.Stripe, a.Members[pm].Path, err)
							}
							a.Warnings = append(a.Warnings, fmt.Sprintf("write-hole log: %s failed: writing the parity of stripe %d: %v", a.Members[pm].Path, e.Stripe, err))
							failed = true
							break
						}
					}
				}
			}
			if skip {
				left++
				blocked[e.Stripe] = append(blocked[e.Stripe], rowRange{e.RowLo, e.RowHi})
				continue
			}
			// Its rows are settled for every parity part, an unlogged one
			// too: that member was out when this write was made and has the
			// parity of the stripe since (rebuilt), or not yet (rebuilding
			// below it: its rebuild writes it); an older entry's, from data
			// this write may have changed, must not go there.
			for k := range e.Parity {
				key := [2]uint64{e.Stripe, uint64(k)}
				covered[key] = append(covered[key], rowRange{e.RowLo, e.RowHi})
			}
			replayed++
		}
		return nil
	}
	if !asm.Clean && !asm.Forced {
		// Every read first: a member failing one refuses the assembly
		// before any write. (One that fails only in the writing pass,
		// after this one read it, leaves its entries as a forced
		// assembly does: the refusal would come after writes.)
		if err := run(false); err != nil {
			return 0, 0, err
		}
		if left > 0 {
			return 0, left, refuse(left)
		}
	}
	if err := run(true); err != nil {
		return replayed, left, err
	}
	a.logNext = next // (the run-time log numbers on from here)
	out := false
	for r := range a.Members {
		out = out || !writable(r)
	}
	if next > engine.ParityLogRenumberAt && !failed && !out && left == 0 {
		// Numbers this high come from a damaged or crafted header or
		// entry (no array writes 2^62 times): every entry is replayed
		// and durable, so every role's area is emptied and the run
		// numbers from 1, far from the largest number a recovery reads.
		// (A crash part way leaves some areas as they were, whose
		// header's checkpoint is the largest: their entries are
		// replayed again, as nothing was written since.) With a role
		// out its area cannot be emptied, and its live entries would
		// outnumber a new run's: the numbers go on.
		for _, m := range a.Members {
			if err := a.resetLogArea(m); err != nil {
				return replayed, left, fmt.Errorf("renumbering the write-hole log from %d: %w", next, err)
			}
		}
		a.logNext = 1
		a.Warnings = append(a.Warnings, fmt.Sprintf("write-hole log: numbered up to %d (a damaged or crafted header or entry): the log areas were emptied and numbering starts again from 1", next))
		return replayed, left, nil
	}
	if failed || out && !asm.Clean {
		// A role is out (missing since the crash, or failed here): its
		// log area, unseen or unread, may hold live entries (numbered
		// at or past next, too), and until the superblocks record it
		// out it may come back as current. So no checkpoint passes them
		// before a superblock write (holdLog), and the rings stay full
		// until one does: their space holds the live entries of the
		// present members.
		a.holdLog()
		return replayed, left, nil
	}
	if replayed+left == 0 && !noHeader {
		return replayed, left, nil
	}
	b := make([]byte, engine.ParityLogHeaderSize)
	h := engine.ParityLogHeader{Array: sb.ArrayUUID, Checkpoint: next}
	if err := h.Encode(b); err != nil {
		return replayed, left, err
	}
	for r, m := range a.Members {
		if !writable(r) {
			continue
		}
		if err := m.WriteBlockSync(int64(sb.LogOffset), b); err != nil {
			return replayed, left, fmt.Errorf("%s: write-hole log header: %w", m.Path, err)
		}
	}
	return replayed, left, nil
}

// replayPieceSectors bounds the rows a replay computes at a time (memory:
// a piece per data member and per parity).
const replayPieceSectors = 2048

// rowRange is rows [lo, hi) of a stripe's chunks.
type rowRange struct{ lo, hi uint64 }

// subtractRows is [lo, hi) less the ranges in l, as [lo, hi) pairs in
// order.
func subtractRows(l []rowRange, lo, hi uint64) [][2]uint64 {
	out := [][2]uint64{{lo, hi}}
	for _, r := range l {
		var next [][2]uint64
		for _, w := range out {
			if r.hi <= w[0] || w[1] <= r.lo {
				next = append(next, w)
				continue
			}
			if w[0] < r.lo {
				next = append(next, [2]uint64{w[0], r.lo})
			}
			if r.hi < w[1] {
				next = append(next, [2]uint64{r.hi, w[1]})
			}
		}
		out = next
	}
	return out
}

// parityLogScanWindow is how much of a member's write-hole log area a
// recovery reads at a time (more for large chunks: ParityLogScanWindow).
// The package's tests set it to 0 (windows of twice the largest entry),
// so their replays go through many windows.
var parityLogScanWindow = 8 << 20
