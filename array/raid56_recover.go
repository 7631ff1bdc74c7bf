package array

import (
	"fmt"

	"github.com/ublk-raid/ublk-raid/engine"
)

// recoverParityLog replays a raid5/6 array's write-hole log at assembly,
// before anything else is written (docs/raid56.md, the write hole): the
// live entries (numbered at or above the largest checkpoint a member's
// log header holds) of every member in sync or rebuilding, once each,
// oldest first; each gives its rows' parity from the entry and the
// stripe's data outside the entry's X as it is on disk, written to the
// stripe's parity members that can take it. Then every member is flushed
// (by the synchronous writes) and each present member's header gets a
// checkpoint past every entry seen, so none is replayed again. An entry
// whose data outside X cannot be read (a member lost with the crash) is
// left: it returns how many were replayed and how many could not be.
func (a *Array) recoverParityLog(sb *engine.Superblock) (replayed, left int, err error) {
	g := *a.Engine.Parity
	if sb.LogBytes == 0 {
		return 0, 0, nil
	}
	st := a.Engine.State()
	stripeEnd := func(s uint64) uint64 { return (s + 1) * g.ChunkSectors }
	readable := func(m int, s uint64) bool {
		ms := st.Members[m]
		return a.Members[m] != nil && (ms.State == engine.MemberActive || ms.State == engine.MemberRebuilding && ms.RebuildOffset >= stripeEnd(s))
	}
	writable := func(m int) bool {
		ms := st.Members[m]
		return a.Members[m] != nil && (ms.State == engine.MemberActive || ms.State == engine.MemberRebuilding)
	}
	var all []engine.ParityLogEntry
	checkpoint := uint64(1)
	for r, m := range a.Members {
		if !writable(r) {
			continue
		}
		area, err := m.ReadBlock(int64(sb.LogOffset), int(sb.LogBytes))
		if err != nil {
			continue // (its entries, if any, are on another parity member too, or its stripes' parity is lost with it)
		}
		if h, err := engine.DecodeParityLogHeader(area, sb.ArrayUUID); err == nil {
			checkpoint = max(checkpoint, h.Checkpoint)
		}
		all = append(all, engine.ScanParityLog(area, g, sb.ArrayUUID)...)
	}
	par, err := engine.NewParity(g.DataMembers(), g.Level == engine.Level6)
	if err != nil {
		return 0, 0, err
	}
	next := checkpoint
	for _, e := range engine.ParityLogReplay(all, checkpoint) {
		next = max(next, e.Seq+1)
		sm := g.Stripe(e.Stripe)
		n := int(e.RowHi-e.RowLo) << 9
		off := int64(a.dataOffset + (e.Stripe*g.ChunkSectors+e.RowLo)<<9)
		data := make([][]byte, g.DataMembers())
		ok := true
		for m := range g.Members {
			slot := sm.Slot[m]
			if slot < 0 || e.Logged&(1<<uint(slot)) != 0 {
				continue
			}
			if !readable(m, e.Stripe) {
				ok = false
				break
			}
			if data[slot], err = a.Members[m].ReadBlock(off, n); err != nil {
				ok = false
				break
			}
		}
		if !ok {
			left++
			continue
		}
		out := [][]byte{make([]byte, n), make([]byte, n)}[:e.Parity]
		if err := par.RecoverParity([][]byte{e.P, e.Q}[:e.Parity], data, e.Logged, out); err != nil {
			return replayed, left, fmt.Errorf("write-hole log entry %d (stripe %d): %w", e.Seq, e.Stripe, err)
		}
		for k, pm := range []int{sm.P, sm.Q}[:e.Parity] {
			if !writable(pm) {
				continue
			}
			if err := a.Members[pm].WriteBlockSync(off, out[k]); err != nil {
				return replayed, left, fmt.Errorf("write-hole log entry %d: parity of stripe %d on %s: %w", e.Seq, e.Stripe, a.Members[pm].Path, err)
			}
		}
		replayed++
	}
	if replayed+left == 0 {
		return 0, 0, nil
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
