package array

import (
	"fmt"

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
// outside X cannot be read (a member lost with the crash) is left: it
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
	readable := func(m int, s uint64) bool {
		ms := a.Engine.State().Members[m]
		return a.Members[m] != nil && (ms.State == engine.MemberActive || ms.State == engine.MemberRebuilding && ms.RebuildOffset >= stripeEnd(s))
	}
	writable := func(m int) bool {
		ms := a.Engine.State().Members[m]
		return a.Members[m] != nil && (ms.State == engine.MemberActive || ms.State == engine.MemberRebuilding)
	}
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
		if !writable(r) {
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
	if noHeader && !asm.Clean && asm.Degraded && !asm.Forced {
		return 0, 0, engine.DirtyDegradedError(asm, asm.Members-asm.ActiveRoles,
			"no header of its write-hole log can be read, so which of its entries to replay is unknown")
	}
	skipReplay := noHeader && (asm.Clean || !asm.Degraded)
	buf, free, err := alignedBuf(engine.ParityLogScanWindow(g, int(sb.LogBytes), parityLogScanWindow))
	if err != nil {
		return 0, 0, err
	}
	defer free()
	var all []engine.ParityLogEntry
	for r, m := range a.Members {
		if !writable(r) {
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
		for _, e := range found {
			// (An entry numbered past any checkpoint a header may hold
			// is damaged or crafted: the run after this one numbers on
			// from at most there, engine.MaxParityLogCheckpoint.)
			if e.Seq < engine.MaxParityLogCheckpoint {
				all = append(all, e)
			}
		}
	}
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
	// First every entry's parity is computed, from the data as the crash
	// left it (a replay writes parity only, which no entry of the same
	// stripe reads), then written: a member failing a write then cannot
	// leave an entry unreplayed after older ones of its stripe were (see
	// leftEntries). A data member that fails a read is unreadable from
	// then on, and the computation starts again.
	type replay struct {
		e   engine.ParityLogEntry
		off int64
		out [][]byte
	}
	bad := uint64(0) // members that failed a read
	var outs []replay
	for {
		canRead := func(m int, s uint64) bool { return bad&(1<<uint(m)) == 0 && readable(m, s) }
		skip := leftEntries(live, g, canRead)
		outs, left = outs[:0], 0
		retry := false
		for i, e := range live {
			if skip[i] {
				left++
				continue
			}
			sm := g.Stripe(e.Stripe)
			n := int(e.RowHi-e.RowLo) << 9
			off := int64(a.dataOffset + (e.Stripe*g.ChunkSectors+e.RowLo)<<9)
			data := make([][]byte, g.DataMembers())
			for m := range g.Members {
				slot := sm.Slot[m]
				if slot < 0 || e.Logged&(1<<uint(slot)) != 0 {
					continue
				}
				if data[slot], err = a.Members[m].ReadBlock(off, n); err != nil {
					bad |= 1 << uint(m)
					retry = true
					break
				}
			}
			if retry {
				break
			}
			out := [][]byte{make([]byte, n), make([]byte, n)}[:e.Parity]
			if err := par.RecoverParity([][]byte{e.P, e.Q}[:e.Parity], data, e.Logged, out); err != nil {
				return 0, left, fmt.Errorf("write-hole log entry %d (stripe %d): %w", e.Seq, e.Stripe, err)
			}
			outs = append(outs, replay{e, off, out})
		}
		if !retry {
			break
		}
	}
	if !asm.Clean && !asm.Forced && left > 0 {
		// Dirty, and an entry cannot be replayed: a member it needs is
		// missing (the assembly was let through on the log's strength:
		// Assembly.DirtyDegraded), failed a read here, or is not rebuilt
		// that far. md's refusal of a dirty degraded array, before
		// anything is written.
		notInSync := 0
		for r := range a.Members {
			if !readableAll(r) {
				notInSync++
			}
		}
		return 0, left, engine.DirtyDegradedError(asm, notInSync, fmt.Sprintf(
			"%d entries of its write-hole log cannot be replayed: a chunk their writes wrote is on a member that is missing, failed a read here, or is not rebuilt that far", left))
	}
	for _, o := range outs {
		sm := g.Stripe(o.e.Stripe)
		for k, pm := range []int{sm.P, sm.Q}[:o.e.Parity] {
			if !writable(pm) || o.e.Unlogged&(1<<uint(k)) != 0 {
				// (Unlogged: the member was out when the write was made,
				// which neither read nor wrote it; back since, rebuilt
				// or rebuilding, it has its own parity.)
				continue
			}
			if err := a.Members[pm].WriteBlockSync(o.off, o.out[k]); err != nil {
				// The member is failed, as a write error fails it when
				// served (but not the last copy: then the assembly
				// fails); the entries stay live (no checkpoint is
				// written past them) until that is durable.
				st, _, _ := a.Engine.FailRedundant(pm)
				if st.Members[pm].State == engine.MemberActive {
					return replayed, left, fmt.Errorf("write-hole log entry %d: parity of stripe %d on %s: %w", o.e.Seq, o.e.Stripe, a.Members[pm].Path, err)
				}
				a.Warnings = append(a.Warnings, fmt.Sprintf("write-hole log: %s failed: writing the parity of stripe %d: %v", a.Members[pm].Path, o.e.Stripe, err))
				failed = true
			}
		}
		replayed++
	}
	a.logNext = next // (the run-time log numbers on from here)
	out := false
	for r := range a.Members {
		out = out || !writable(r)
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

// leftEntries says which of the live entries (oldest first) a recovery
// must leave: those needing data outside their X that cannot be read
// (readable), and every older entry of the same stripe whose rows meet a
// left one's. An older entry describes the stripe before the newer
// write: replayed without the newer one, it would put back the parity of
// data the newer write has changed since (the newer write's own rows
// stay as its crash left them: the write hole, with a member lost with
// the crash).
func leftEntries(live []engine.ParityLogEntry, g engine.ParityGeometry, readable func(m int, stripe uint64) bool) []bool {
	skip := make([]bool, len(live))
	type rows struct{ lo, hi uint64 }
	blocked := map[uint64][]rows{}
	for i := len(live) - 1; i >= 0; i-- {
		e := live[i]
		sm := g.Stripe(e.Stripe)
		for m := range g.Members {
			slot := sm.Slot[m]
			if slot >= 0 && e.Logged&(1<<uint(slot)) == 0 && !readable(m, e.Stripe) {
				skip[i] = true
				break
			}
		}
		for _, b := range blocked[e.Stripe] {
			if b.lo < e.RowHi && e.RowLo < b.hi {
				skip[i] = true
			}
		}
		if skip[i] {
			blocked[e.Stripe] = append(blocked[e.Stripe], rows{e.RowLo, e.RowHi})
		}
	}
	return skip
}

// parityLogScanWindow is how much of a member's write-hole log area a
// recovery reads at a time (more for large chunks: ParityLogScanWindow).
// The package's tests set it to 0 (windows of twice the largest entry),
// so their replays go through many windows.
var parityLogScanWindow = 8 << 20
