package resync

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Jobs on a raid5/6 array (engine.Array.Parity set). Positions and Need,
// Skip, Progress are as for copies (array sectors; member sectors for a
// Rebuild), but a step is one whole stripe: a resync, check or repair
// step covers the stripe's data (ChunkSectors × data members of array
// sectors), a rebuild step the stripe's chunk on the targets
// (ChunkSectors member sectors). A stripe is worked through in pieces of
// at most parityPieceSectors of every member's chunk (parity is computed
// column by column: a piece is consistent on its own), each piece under
// the Barrier raised over the stripe's array range, which for a parity
// array is its stripe lock: no user request is inside the stripe while
// the piece is read and written.
//
//   - Resync and Repair read every member's piece, compute P (and Q) from
//     the data and write those that differ; Check only counts. As md
//     (raid5_sync_request: nothing while mddev->degraded >= max_degraded),
//     a raid5 with a member out of sync and a raid6 with two stop the job
//     with ErrDegraded: a lost member's data lives only in the parity the
//     job would rewrite. A raid6 with one member out (faulty, missing, or
//     rebuilding and not rebuilt past the piece) is worked on without it,
//     as md's handle_parity_checks6 does: the lost member is neither read
//     nor written, and what is checked depends on the member lost:
//   - raid6, Q lost: P is checked (rewritten) from the data.
//   - raid6, P lost: Q is checked (rewritten) from the data.
//   - raid6, a data member lost: its piece is first reconstructed from the
//     other data and P (md's ops_run_compute6_1: XOR, Q left out), which
//     makes P match trivially; Q is then checked (rewritten) against
//     that data. A wrong P and a wrong Q cannot be told apart there: a
//     mismatch says they disagree, and a repair trusts P (rewrites Q),
//     as md does. (md also writes the chunk it rebuilt to a lost member
//     still present, a recovering one; here that member's rebuild
//     does.)
//   - Rebuild reads the other members' pieces (those readable over the
//     stripe) and reconstructs the targets' (data from the others and P,
//     or Q for raid6; P and Q recomputed), then writes them.
//
// Mismatches counts 4 KiB rows of a stripe (the same 4 KiB of every
// member) whose P or Q differed, as md counts its 4 KiB stripe heads
// (md's mismatch_cnt is that in sectors: 8 per row).
//
// Read errors: in a check or repair (whose stripes are trusted), as md's
// scrub does, the 4 KiB rows members fail to read (as many members per
// row as the parity covers) are reconstructed from the others' rows,
// written back and read back; the member fails only when that fails too, or when the
// error is a timeout (Job.Unrepairable). A row more members fail to read
// than the parity covers is lost: left as it is, counted (LostRows), and
// the job goes on, failing nobody (md's scrub). A resync (parity untrusted)
// repairs only P and Q so; a data member failing a read fails. A rebuild
// rewrites a source's rows that fail a read the same way while the
// parity covers them with the targets (md's R5_ReadError: the member
// stays), and stops (ErrNoCopy) at a row it cannot; a source that times
// out is failed and rebuilt around while the parity covers it.

// parityPieceSectors bounds the piece of a member's chunk one parity step
// reads or writes at a time (256 KiB): the job's buffers are (members +
// 2) pieces, whatever the chunk size (up to 64 MiB).
const parityPieceSectors = 512

// ErrDegraded stops a parity resync, check or repair: as many members are
// out of sync as the parity covers (raid5: one, raid6: two), so no parity
// is left to check or recompute that does not hold a lost member's data.
var ErrDegraded = errors.New("raid5/6 parity cannot be resynced or checked with as many members out of sync as the parity covers")

// parityRun is a parity job's state.
type parityRun struct {
	g     engine.ParityGeometry
	p     *engine.Parity
	piece uint64   // sectors of a member's chunk per piece
	bufs  [][]byte // a piece per member, then the computed P and Q
	// shards is the data in syndrome order, then P and Q, for the
	// parity's calls.
	shards [][]byte
	per    uint64 // array sectors per stripe
}

// setupParity checks job against a raid5/6 array, makes the piece
// buffers, rounds the job's start down to its stripe and returns the
// job's end position.
func (r *run) setupParity() (uint64, error) {
	g := *r.arr.Parity
	if err := checkKind(r.job, g.Members); err != nil {
		return 0, err
	}
	if len(r.job.Targets) > g.ParityMembers() {
		return 0, fmt.Errorf("rebuild: %d targets, but %s rebuilds at most %d at once", len(r.job.Targets), g.Level, g.ParityMembers())
	}
	p, err := engine.NewParity(g.DataMembers(), g.Level == engine.Level6)
	if err != nil {
		return 0, err
	}
	pr := &parityRun{g: g, p: p, piece: min(g.ChunkSectors, parityPieceSectors), per: g.ChunkSectors * uint64(g.DataMembers())}
	pb := int(pr.piece << 9)
	buf := alignedBuf((g.Members + 2) * pb)
	for i := range g.Members + 2 {
		pr.bufs = append(pr.bufs, buf[i*pb:(i+1)*pb:(i+1)*pb])
	}
	pr.shards = make([][]byte, g.DataMembers()+p.Count())
	r.par = pr
	if r.job.Kind == Rebuild {
		r.job.Start -= r.job.Start % g.ChunkSectors
		return g.Stripes() * g.ChunkSectors, nil
	}
	r.job.Start -= r.job.Start % pr.per
	return g.ArraySectors(), nil
}

// parityArrayStep resyncs, checks or repairs the stripe at array sector a
// (a stripe's start) and returns its array sectors.
func (r *run) parityArrayStep(a uint64) (n uint64, did bool, err error) {
	pr := r.par
	g := pr.g
	n = pr.per
	if r.job.Need != nil && !r.job.Need(a, n) {
		if r.job.Skip != nil {
			if next := min(r.job.Skip(a+n), g.ArraySectors()); next > a+n {
				next -= next % pr.per
				n = max(n, next-a)
			}
		}
		r.res.Skipped += n
		return n, false, nil
	}
	s := a / pr.per
	for o := uint64(0); o < g.ChunkSectors; o += pr.piece {
		if err := r.bar.Raise(r.ctx, a, n); err != nil {
			return 0, did, err
		}
		err := r.parityPiece(s, o)
		r.bar.Lower()
		if err != nil {
			return 0, did, fmt.Errorf("stripe %d: %w", s, err)
		}
		did = true
	}
	r.res.Synced += n
	return n, did, nil
}

// parityPiece reads every member's piece of stripe s at chunk offset o,
// computes the parity and counts (and for Resync and Repair rewrites)
// the parity that differs. The stripe is locked.
func (r *run) parityPiece(s, o uint64) error {
	pr := r.par
	g := pr.g
	st := r.arr.State()
	ms := s*g.ChunkSectors + o
	out, err := r.parityOut(st, ms+pr.piece)
	if err != nil {
		return err
	}
	m := g.Stripe(s)
	nd := g.DataMembers()
	var bad uint64 // members whose piece could not be read whole
	for i := range g.Members {
		if sl := m.Slot[i]; sl >= 0 {
			pr.shards[sl] = pr.bufs[i]
		}
		if out&(1<<uint(i)) != 0 {
			continue
		}
		if err := r.members.ReadAt(i, pr.bufs[i], ms); err != nil {
			if r.job.Unrepairable != nil && r.job.Unrepairable(err) {
				return r.memberError(i, "read", ms, err)
			}
			bad |= 1 << uint(i)
			r.res.ReadErrors++
		}
		if !r.unchanged(st, i) {
			return fmt.Errorf("member %d was replaced: %w", i, ErrDegraded)
		}
	}
	var lost uint64 // rows of the piece unreadable on more members than the parity covers
	if bad != 0 {
		var err error
		if lost, err = r.parityRewriteBad(s, ms, bad, out); err != nil {
			return err
		}
	}
	if out != 0 {
		if l := bits.TrailingZeros64(out); m.Slot[l] >= 0 {
			// A data member out: its piece from the others and P, Q left
			// out (md's ops_run_compute6_1 XORs with P), so that Q is
			// checked against it below. P then matches trivially.
			for k := range pr.p.Count() {
				pr.shards[nd+k] = nil
			}
			pr.shards[nd] = pr.bufs[m.P]
			pr.shards[m.Slot[l]] = pr.bufs[l][:0]
			if err := pr.p.ReconstructData(pr.shards); err != nil {
				return err
			}
			pr.shards[m.Slot[l]] = pr.bufs[l]
		}
	}
	computed := pr.bufs[g.Members : g.Members+pr.p.Count()]
	if err := pr.p.Compute(pr.shards[:nd], computed); err != nil {
		return err
	}
	pms := [2]int{m.P, m.Q}
	const blk = BlockSectors << 9
	for off := 0; off < len(computed[0]); off += blk {
		if lost&(1<<uint(off/blk)) != 0 {
			continue // (its parity is not checked, nor rewritten: below)
		}
		for k, pm := range pms[:pr.p.Count()] {
			if out&(1<<uint(pm)) == 0 && !bytes.Equal(computed[k][off:off+blk], pr.bufs[pm][off:off+blk]) {
				r.res.Mismatches++
				break
			}
		}
	}
	if r.job.Kind == Check {
		return nil
	}
	for k, pm := range pms[:pr.p.Count()] {
		if out&(1<<uint(pm)) != 0 || bytes.Equal(computed[k], pr.bufs[pm]) {
			continue // (a lost parity member is neither compared nor written)
		}
		if lost == 0 {
			// One write of the piece; counted are the rows that differed.
			if err := r.write(pm, computed[k], ms); err != nil {
				return err
			}
			for off := 0; off < len(computed[k]); off += blk {
				if !bytes.Equal(computed[k][off:off+blk], pr.bufs[pm][off:off+blk]) {
					r.res.Repaired++
				}
			}
			continue
		}
		// Row by row around the lost rows: their parity stays as it is
		// (unreadable rows stay unreadable, not overwritten with what a
		// failed read left in the buffer).
		for off := 0; off < len(computed[k]); off += blk {
			if lost&(1<<uint(off/blk)) != 0 || bytes.Equal(computed[k][off:off+blk], pr.bufs[pm][off:off+blk]) {
				continue
			}
			if err := r.write(pm, computed[k][off:off+blk], ms+uint64(off>>9)); err != nil {
				return err
			}
			r.res.Repaired++
		}
	}
	return nil
}

// parityOut returns the members a resync, check or repair piece ending
// at member sector end works around (not read, not written): those not
// readable there (faulty, missing, or rebuilding and not rebuilt that
// far, as md's analyse_stripe treats a recovering member below its
// recovery_offset as in sync). It fails with ErrDegraded when as many
// members are out of sync as the parity covers (md's raid5_sync_request
// skips a sync while mddev->degraded >= max_degraded): a raid5 with one,
// a raid6 with two.
func (r *run) parityOut(st *engine.ArrayState, end uint64) (uint64, error) {
	var out uint64
	n, first := 0, -1
	for i, m := range st.Members {
		if m.State != engine.MemberActive {
			n++
			if first < 0 {
				first = i
			}
		}
		if !readable(st, i, end) {
			out |= 1 << uint(i)
		}
	}
	if n >= r.par.p.Count() {
		return 0, fmt.Errorf("member %d is %s, %d of %d out of sync: %w", first, st.Members[first].State, n, len(st.Members), ErrDegraded)
	}
	return out, nil
}

// paritySlot is member i's place among the shards of stripe m (nd data
// members): its data slot, nd for P, nd+1 for Q.
func paritySlot(m engine.StripeMap, nd, i int) int {
	switch i {
	case m.P:
		return nd
	case m.Q:
		return nd + 1
	}
	return int(m.Slot[i])
}

// parityRewriteBad reads the pieces at member sector ms of the members
// in bad (whose whole-piece reads failed) again 4 KiB row by row, and
// rewrites each row that still fails from the others' rows (as many
// members per row as the parity covers), then reads it back: it must read
// back as written, or its member fails (md's scrub rewrites a read error
// so, per 4 KiB stripe head: a row that reads is kept as it is, so a
// wrong parity elsewhere in the piece is still counted, not copied into
// the data). A resync rewrites only P and Q rows (the data's parity is
// not trusted). The rows are then in the piece buffers, as if read. The
// stripe is locked.
//
// A row that more members fail to read than the parity covers is lost
// whatever is done; a check or repair leaves it as it is and goes on (md's
// handle_failed_sync: no member is failed for it, which would only make
// every other bad sector a loss too) and returns it in lost (bit i: row
// i of the piece), counted in Result.LostRows. A resync fails a member.
func (r *run) parityRewriteBad(s, ms uint64, bad, missing uint64) (lost uint64, err error) {
	pr := r.par
	g := pr.g
	m := g.Stripe(s)
	nd := g.DataMembers()
	const blk = BlockSectors << 9
	rows := len(pr.bufs[0]) / blk
	var rowBad [parityPieceSectors / BlockSectors]uint64
	var errs [engine.MaxMembers]error
	for b := bad; b != 0; b &= b - 1 {
		i := bits.TrailingZeros64(b)
		for row := range rows {
			sec := ms + uint64(row*BlockSectors)
			if err := r.members.ReadAt(i, pr.bufs[i][row*blk:(row+1)*blk], sec); err != nil {
				if r.job.Unrepairable != nil && r.job.Unrepairable(err) {
					return 0, r.memberError(i, "read", sec, err)
				}
				rowBad[row] |= 1 << uint(i)
				errs[i] = err
			}
		}
	}
	shard := func(i int) int { return paritySlot(m, nd, i) }
	shards := pr.shards[:nd+pr.p.Count()]
	back := pr.bufs[g.Members][:blk]
	for row := range rows {
		rb := rowBad[row]
		if rb == 0 {
			continue
		}
		sec := ms + uint64(row*BlockSectors)
		first := bits.TrailingZeros64(rb)
		if n := bits.OnesCount64(rb | missing); n > pr.p.Count() {
			if r.job.Kind == Rebuild || r.job.Kind == Resync {
				// A row no copy can be read from: the job stops there
				// and fails no member (md's handle_failed_sync: "don't
				// fail devices as that won't really help"), which
				// would only take a further copy of everything else.
				return 0, fmt.Errorf("%d members of the stripe cannot be read at member sector %d (member %d: %w): %w", n, sec, first, errs[first], engine.ErrNoCopy)
			}
			lost |= 1 << uint(row)
			r.res.LostRows++
			continue
		}
		if r.job.Kind == Resync {
			for b := rb; b != 0; b &= b - 1 {
				if i := bits.TrailingZeros64(b); m.Slot[i] >= 0 {
					return 0, r.memberError(i, "read", sec, errs[i])
				}
			}
		}
		off := row * blk
		for i := range g.Members {
			shards[shard(i)] = pr.bufs[i][off : off+blk]
			if (rb|missing)&(1<<uint(i)) != 0 {
				shards[shard(i)] = pr.bufs[i][off:off]
			}
		}
		if err := pr.p.Reconstruct(shards); err != nil {
			return 0, err
		}
		for b := rb; b != 0; b &= b - 1 {
			i := bits.TrailingZeros64(b)
			row := pr.bufs[i][off : off+blk]
			copy(row, shards[shard(i)])
			if err := r.write(i, row, sec); err != nil {
				return 0, err
			}
			if err := r.members.ReadAt(i, back, sec); err != nil {
				return 0, r.memberError(i, "read", sec, fmt.Errorf("reading back the rewrite of a read error (%v): %w", errs[i], err))
			}
			if !bytes.Equal(back, row) {
				return 0, r.memberError(i, "read", sec, fmt.Errorf("the rewrite of a read error (%v) read back different", errs[i]))
			}
			r.res.ReadErrorsRewritten++
			if r.job.OnReadErrorRewritten != nil {
				r.job.OnReadErrorRewritten(i)
			}
		}
	}
	// (The data shards again, for the caller's Compute.)
	for i := range g.Members {
		if sl := m.Slot[i]; sl >= 0 {
			shards[sl] = pr.bufs[i]
		}
	}
	return lost, nil
}

// parityRebuildStep rebuilds the targets' chunk of the stripe at member
// sector ms (a stripe's start) and returns its member sectors.
func (r *run) parityRebuildStep(ms uint64) (n uint64, did bool, err error) {
	pr := r.par
	g := pr.g
	n = g.ChunkSectors
	st := r.arr.State()
	if err := r.targetsKept(st); err != nil {
		return 0, false, err
	}
	var want uint64 // targets not rebuilt past the stripe yet
	for _, t := range r.job.Targets {
		if m := st.Members[t]; !(m.State == engine.MemberRebuilding && m.RebuildOffset >= ms+n) {
			want |= 1 << uint(t)
		}
	}
	s := ms / g.ChunkSectors
	a := s * pr.per
	if want == 0 || (r.job.Need != nil && !r.job.Need(a, pr.per)) {
		r.res.Skipped += n
		return n, false, nil
	}
	for o := uint64(0); o < g.ChunkSectors; o += pr.piece {
		if err := r.bar.Raise(r.ctx, a, pr.per); err != nil {
			return 0, did, err
		}
		err := r.parityRebuildPiece(s, o, want)
		r.bar.Lower()
		if err != nil {
			return 0, did, fmt.Errorf("stripe %d: %w", s, err)
		}
		did = true
	}
	r.res.Synced += n
	return n, did, nil
}

// parityRebuildPiece reconstructs the piece at chunk offset o of stripe
// s for the targets in want (a mask of roles) and writes it to them. The
// stripe is locked.
func (r *run) parityRebuildPiece(s, o uint64, want uint64) error {
	pr := r.par
	g := pr.g
	st := r.arr.State() // after the lock: any write since sees it too
	ms := s*g.ChunkSectors + o
	end := (s + 1) * g.ChunkSectors
	m := g.Stripe(s)
	nd := g.DataMembers()
	shard := func(i int) int { return paritySlot(m, nd, i) }
	var missing, bad uint64 // members not read (targets, out of sync, failed); reads that failed
	var readErr error
	for i := range g.Members {
		if want&(1<<uint(i)) != 0 || !r.readableNow(st, i, end) {
			missing |= 1 << uint(i)
			continue
		}
		if err := r.members.ReadAt(i, pr.bufs[i], ms); err != nil {
			r.res.ReadErrors++
			if r.job.Unrepairable == nil || !r.job.Unrepairable(err) {
				bad |= 1 << uint(i) // (its rows rewritten below)
				continue
			}
			// A timeout: failed (unless it is needed: then the job
			// stops below), and rebuilt around while the parity covers
			// it, as a user read is.
			e := &MemberError{Role: i, Op: "read", Sector: ms, Err: err}
			if r.job.OnMemberError != nil {
				r.job.OnMemberError(i, e)
			}
			readErr = e
			missing |= 1 << uint(i)
			continue
		}
		if !r.unchanged(st, i) {
			return fmt.Errorf("member %d was replaced during the read", i)
		}
	}
	if lost := bits.OnesCount64(missing); lost > pr.p.Count() {
		if readErr != nil {
			return fmt.Errorf("%d members of the stripe cannot be read: %w: %w", lost, engine.ErrNoCopy, readErr)
		}
		return fmt.Errorf("%d members of the stripe cannot be read: %w", lost, engine.ErrNoCopy)
	}
	if bad != 0 {
		// A source's read error, the parity covering it with the
		// targets: its rows are rewritten from the others and read back
		// (md's R5_ReadError, R5_ReWrite), and it stays. A row lost on
		// too many members stops the rebuild (ErrNoCopy).
		for {
			_, err := r.parityRewriteBad(s, ms, bad, missing)
			var me *MemberError
			if err == nil {
				break
			}
			if !errors.As(err, &me) || bad&(1<<uint(me.Role)) == 0 {
				return err
			}
			// The rewrite, or its read back, failed: the member is
			// failed (OnMemberError) and rebuilt around while the
			// parity covers it; the others' rows again.
			bad &^= 1 << uint(me.Role)
			missing |= 1 << uint(me.Role)
			if lost := bits.OnesCount64(missing); lost > pr.p.Count() {
				return fmt.Errorf("%d members of the stripe cannot be read: %w: %w", lost, engine.ErrNoCopy, err)
			}
		}
		for b := bad; b != 0; b &= b - 1 {
			if i := bits.TrailingZeros64(b); !r.unchanged(st, i) {
				return fmt.Errorf("member %d was replaced during the read", i)
			}
		}
	}
	for i := range g.Members {
		pr.shards[shard(i)] = pr.bufs[i]
		if missing&(1<<uint(i)) != 0 {
			pr.shards[shard(i)] = pr.bufs[i][:0] // reconstructed into its buffer
		}
	}
	if err := pr.p.Reconstruct(pr.shards); err != nil {
		return err
	}
	for i := range g.Members {
		if want&(1<<uint(i)) == 0 {
			continue
		}
		if err := r.write(i, pr.shards[shard(i)], ms); err != nil {
			return err
		}
	}
	return nil
}
