package array

import (
	"context"

	"github.com/ublk-raid/ublk-raid/engine"
)

// repairParity is read repair for raid5/6 (md's: a read error of a
// member's rows is answered from the reconstruction, then the rows are
// rewritten from it): r is member sectors [sector, sector+sectors) of
// the roles in r.bad, within one stripe. With the stripe locked (no
// request writes it meanwhile, so data and parity agree), every other
// member's rows are read, the bad rows rebuilt from them and written. A
// rewrite that fails fails its member (never past the parity's budget:
// FailRedundant); when too few members can be read the rows are left as
// they are (the next read that fails reports them again). Repair worker
// only (its Parity is the worker's).
func (a *Array) repairParity(ctx context.Context, r repairReq, buf []byte, io memberIO) {
	g := *a.Engine.Parity
	cs := g.ChunkSectors
	stripe, lo := r.sector/cs, r.sector%cs
	if stripe >= g.Stripes() || r.sectors == 0 || r.bad == 0 {
		return
	}
	if r.bad = a.parityReadErrors(r.bad); r.bad == 0 {
		return
	}
	if a.repairPar == nil {
		p, err := engine.NewParity(g.DataMembers(), g.Level == engine.Level6)
		if err != nil {
			return
		}
		a.repairPar = p
	}
	per := cs * uint64(g.DataMembers())
	end := min(lo+uint64(r.sectors), cs)
	// Every member's rows in buf (page-aligned, for O_DIRECT), each at
	// a multiple of 4 KiB (members with 4 KiB logical blocks), in pieces
	// of whole pages.
	step := uint64(len(buf)/g.Members) &^ 4095 >> 9
	if step == 0 {
		return // (MaxMembers keeps it at 32 sectors or more)
	}
	for lo < end {
		n := min(end-lo, step)
		if err := a.xbar.Raise(ctx, stripe*per, per); err != nil {
			return
		}
		a.repairParityRows(r.bad, stripe, lo, n, buf, io)
		a.xbar.Lower()
		lo += n
	}
}

// repairParityRows rewrites rows [lo, lo+n) of stripe's chunks on the
// members in bad from the others (the stripe raised).
func (a *Array) repairParityRows(bad, stripe, lo, n uint64, buf []byte, io memberIO) {
	g := *a.Engine.Parity
	cs := g.ChunkSectors
	st := a.Engine.State()
	sm := g.Stripe(stripe)
	nd := g.DataMembers()
	slot := func(m int) int { // shard index: data in syndrome order, P, Q
		switch m {
		case sm.P:
			return nd
		case sm.Q:
			return nd + 1
		}
		return int(sm.Slot[m])
	}
	shards := make([][]byte, nd+g.ParityMembers())
	missing := 0
	for m, ms := range st.Members {
		b := buf[uint64(m)*n<<9 : uint64(m+1)*n<<9]
		// Missing: empty, with b's room for the reconstruction.
		shards[slot(m)] = b[:0]
		ok := ms.State == engine.MemberActive || (ms.State == engine.MemberRebuilding && ms.RebuildOffset >= (stripe+1)*cs)
		if !ok || bad&(1<<uint(m)) != 0 {
			missing++
			continue
		}
		if io.ReadAt(m, b, stripe*cs+lo) != nil || !a.sameMember(st, m) {
			// (Its own read errors are reported by the reads that meet them.)
			missing++
			continue
		}
		shards[slot(m)] = b
	}
	if missing > g.ParityMembers() {
		return // not enough left to rebuild from: left as it is
	}
	// A read member's rows, no longer needed once the bad ones are
	// rebuilt: rewriteBadRows reads into it.
	var scratch []byte
	for m := range g.Members {
		if b := shards[slot(m)]; len(b) > 0 && scratch == nil {
			scratch = b
		}
	}
	if err := a.repairPar.Reconstruct(shards); err != nil {
		return
	}
	for m := range g.Members {
		if bad&(1<<uint(m)) == 0 || !writable(st.Members[m]) || !a.sameMember(st, m) {
			continue // (a device put in the role since is rebuilt whole)
		}
		a.mu.Lock()
		dev := a.current[m].Load()
		a.mu.Unlock()
		rewrote, err := a.rewriteBadRows(m, shards[slot(m)], stripe*cs+lo, scratch, io)
		if err != nil {
			// Not a device put in the role meanwhile (failHolding: the
			// check and the change under the array's lock).
			if !a.sameMember(st, m) {
				continue
			}
			if st, changed := a.failHolding(m, dev); changed {
				a.persist(st)
			}
			continue
		}
		if rewrote {
			a.readRepairs.Add(1)
		}
	}
}

// rewriteBadRows writes member m's rows at sector from rebuilt, one 4 KiB
// block at a time, only where the member fails to read the block (into
// scratch): a block that reads is kept as it is, so that a parity that
// disagrees with the data elsewhere in the piece (what check counts) is
// not copied into it; md rewrites only the page that failed. A rewritten
// block is read back (md's R5_ReWrite). It reports whether it rewrote
// anything, and the first error of a rewrite or of its read-back. Rows
// not in whole blocks, or no scratch, are rewritten whole.
func (a *Array) rewriteBadRows(m int, rebuilt []byte, sector uint64, scratch []byte, io memberIO) (bool, error) {
	const block = 4096
	rewrite := func(b []byte, s uint64) error {
		err := io.WriteAt(m, b, s)
		if err == nil {
			err = io.ReadAt(m, b, s)
		}
		return err
	}
	if len(scratch) < block || len(rebuilt)%block != 0 {
		return true, rewrite(rebuilt, sector)
	}
	rewrote := false
	for off := 0; off < len(rebuilt); off += block {
		s := sector + uint64(off>>9)
		if io.ReadAt(m, scratch[:block], s) == nil {
			continue
		}
		rewrote = true
		if err := rewrite(rebuilt[off:off+block], s); err != nil {
			return true, err
		}
	}
	return rewrote, nil
}
