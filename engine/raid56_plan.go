package engine

import (
	"errors"
	"fmt"
	"math/bits"
)

// ParityWriteMode is how one segment of a write to a parity stripe keeps
// the parity right.
type ParityWriteMode uint8

const (
	// ParityRCW (reconstruct-write): read the data chunks the write does
	// not cover, compute the parity from them and the new data. A full
	// stripe write is RCW with nothing to read.
	ParityRCW ParityWriteMode = iota
	// ParityRMW (read-modify-write): read the old data of the chunks
	// written and the old parity; new parity = old parity + the change.
	ParityRMW
	// ParityReconstruct: neither of the above can run (raid6 with two
	// members gone, one of them written): read every readable chunk,
	// rebuild the missing ones' old data from the parity, then compute the
	// parity as RCW does.
	ParityReconstruct
	// ParityDataOnly: no parity member can be written (raid5 with P gone,
	// raid6 with P and Q gone): the data is written, nothing is read.
	ParityDataOnly
)

func (m ParityWriteMode) String() string {
	return [...]string{"rcw", "rmw", "reconstruct", "data-only"}[m]
}

// StripeSegment is one part of a write to a stripe: rows [Lo, Hi)
// (sectors within each chunk) over which the same data chunks are written,
// planned with one mode. Members are bit masks by member index.
type StripeSegment struct {
	Lo, Hi uint64
	Mode   ParityWriteMode
	// Written: the data members the write covers in these rows (whether
	// or not they can take it); Reads: the members to read first (old
	// data and parity for RMW, the data not written for RCW, every
	// readable member for Reconstruct); Missing: data members whose old
	// data Reconstruct rebuilds; Writes: the members to write (written
	// data members that can be written, the parity members that can, and
	// for Reconstruct the Missing ones rebuilding, with the rebuilt rows).
	Written, Reads, Missing, Writes uint64
}

// ErrStripeLost is PlanStripeWrite's error when more members of the
// stripe are unreadable than the parity can stand in for.
var ErrStripeLost = errors.New("more members of the stripe are lost than its parity covers")

// PlanStripeWrite plans a write of array sectors [sector, sector+sectors),
// which must lie within one stripe, appending the segments to segs. With
// every member readable the mode of each segment is md's choice
// (handle_stripe_dirtying): RMW when it reads fewer chunks than RCW, else
// RCW (a tie too). With members lost it is the cheaper of the two that
// they leave possible (md always reconstruct-writes when a parity member
// is lost; an RMW of the parity left is as right and reads less),
// Reconstruct when neither is. parityTrusted false (a region never
// written, or not resynced since: its parity may be garbage) rules out
// RMW, which builds on the old parity, as md forces RCW below its resync
// point; RCW makes the rows it writes consistent. When RCW cannot run (a
// data member not written is lost) it is Reconstruct still: the lost
// chunk rebuilt from garbage parity is garbage, no worse than the
// never-written chunk it stands for, and the new parity is computed over
// it, so the rows come out consistent; and where the stripe's parity was
// right (written since, in a region whose state cannot say so per
// stripe), the lost data is kept, which taking it as zeroes would destroy.
// (A region whose parity is untrusted because a crash left it dirty, with
// a member lost, is md's dirty degraded array: assembly lets it start only
// when the write-hole log replayed the parity of every stripe a write was
// in flight on, else refuses it without force: ErrDirtyDegraded.) A member is readable in the stripe when
// active, or rebuilding past the stripe's end; writable when active or
// rebuilding.
func (g ParityGeometry) PlanStripeWrite(st *ArrayState, sector uint64, sectors uint32, parityTrusted bool, segs []StripeSegment) ([]StripeSegment, error) {
	return g.planWrite(st, 0, sector, sectors, parityTrusted, segs)
}

// planWrite is PlanStripeWrite with the members in avoid taken as
// unreadable (a read of them failed: read repair rewrites them).
func (g ParityGeometry) planWrite(st *ArrayState, avoid uint64, sector uint64, sectors uint32, parityTrusted bool, segs []StripeSegment) ([]StripeSegment, error) {
	if sectors == 0 {
		return segs, nil
	}
	v, err := g.view(st, avoid, sector, sectors)
	if err != nil {
		return segs, fmt.Errorf("write: %w", err)
	}
	if lost := bits.OnesCount64((v.data | v.parity) &^ v.readable); lost > g.ParityMembers() {
		return segs, fmt.Errorf("stripe %d: %d members unreadable: %w", v.stripe, lost, ErrStripeLost)
	}
	g.forEachRun(&v.m, v.first, v.last, func(a, b, written uint64) {
		segs = append(segs, planSegment(a, b, written, v.data, v.parity, v.readable, v.writable, v.rebuilding, parityTrusted))
	})
	return segs, nil
}

// stripeView is one stripe as a plan sees it: its map, the data and
// parity members, which members can be read and written, and the
// planned range within the stripe's data, [first, last).
type stripeView struct {
	stripe                           uint64
	m                                StripeMap
	data, parity, readable, writable uint64
	// rebuilding: members rebuilding and not rebuilt past the stripe
	// (unreadable there, avoid or not).
	rebuilding  uint64
	first, last uint64
}

// view checks that [sector, sector+sectors) lies within one stripe and
// returns that stripe's view under st, the members in avoid unreadable.
func (g ParityGeometry) view(st *ArrayState, avoid uint64, sector uint64, sectors uint32) (stripeView, error) {
	var v stripeView
	cs := g.ChunkSectors
	nd := uint64(g.DataMembers())
	v.stripe = sector / cs / nd
	end := sector + uint64(sectors)
	if (end-1)/cs/nd != v.stripe || end > g.ArraySectors() {
		return v, fmt.Errorf("%d+%d does not lie within one stripe of the array", sector, sectors)
	}
	if len(st.Members) != g.Members {
		return v, fmt.Errorf("state has %d members, the geometry %d", len(st.Members), g.Members)
	}
	v.m = g.Stripe(v.stripe)
	stripeEnd := (v.stripe + 1) * cs
	for i, ms := range st.Members {
		if ms.readable(stripeEnd) && avoid&(1<<uint(i)) == 0 {
			v.readable |= 1 << uint(i)
		}
		if ms.writable() {
			v.writable |= 1 << uint(i)
		}
		if ms.State == MemberRebuilding && !ms.readable(stripeEnd) {
			v.rebuilding |= 1 << uint(i)
		}
	}
	for d := range int(nd) {
		v.data |= 1 << uint(v.m.Data[d])
	}
	v.parity = 1 << uint(v.m.P)
	if v.m.Q >= 0 {
		v.parity |= 1 << uint(v.m.Q)
	}
	v.first, v.last = sector-v.stripe*cs*nd, end-v.stripe*cs*nd
	return v, nil
}

// forEachRun calls fn for each run of rows [a, b) of the stripe over
// which the same data members are covered by the stripe's data range
// [first, last) (sectors from the start of the stripe's data), with those
// members as a mask; runs that cover none are skipped.
func (g ParityGeometry) forEachRun(m *StripeMap, first, last uint64, fn func(a, b, members uint64)) {
	cs := g.ChunkSectors
	nd := uint64(g.DataMembers())
	lo := func(d uint64) uint64 { return min(max(first, d*cs), (d+1)*cs) - d*cs }
	hi := func(d uint64) uint64 { return max(min(last, (d+1)*cs), d*cs) - d*cs }
	// Run boundaries: 0, the chunk size and every chunk's lo and hi.
	var cuts [2*MaxMembers + 2]uint64
	nc := 0
	for d := range nd {
		for _, c := range [2]uint64{lo(d), hi(d)} {
			if c > 0 && c < cs {
				cuts[nc] = c
				nc++
			}
		}
	}
	cuts[nc], cuts[nc+1] = 0, cs
	nc += 2
	sortUint64(cuts[:nc])
	for k := 0; k+1 < nc; k++ {
		a, b := cuts[k], cuts[k+1]
		if a == b {
			continue
		}
		var members uint64
		for d := range nd {
			if lo(d) <= a && b <= hi(d) && lo(d) < hi(d) {
				members |= 1 << uint(m.Data[d])
			}
		}
		if members != 0 {
			fn(a, b, members)
		}
	}
}

// planSegment picks the mode of rows whose written data members are
// written, as md does.
func planSegment(lo, hi, written, data, parity, readable, writable, rebuilding uint64, parityTrusted bool) StripeSegment {
	s := StripeSegment{Lo: lo, Hi: hi, Written: written, Writes: written & writable}
	par := parity & writable
	if par == 0 {
		s.Mode = ParityDataOnly
		return s
	}
	s.Writes |= par
	rmw := written | par // old data of the written chunks, old parity
	rcw := data &^ written
	rmwOK := rmw&^readable == 0 && parityTrusted
	rcwOK := rcw&^readable == 0
	nrmw, nrcw := bits.OnesCount64(rmw), bits.OnesCount64(rcw)
	switch {
	case rmwOK && rcwOK && nrmw < nrcw && nrmw > 0:
		s.Mode, s.Reads = ParityRMW, rmw
	case rcwOK:
		s.Mode, s.Reads = ParityRCW, rcw
	case rmwOK:
		s.Mode, s.Reads = ParityRMW, rmw
	default:
		// Over untrusted parity too: a lost chunk rebuilt from garbage
		// parity is garbage, which is what an unwritten chunk holds
		// anyway, and the new parity stands for it; where the parity is
		// right after all (a stripe a write already made consistent in a
		// region the bitmap cannot yet trust), the lost data is kept.
		s.Mode = ParityReconstruct
		s.Reads = (data | parity) & readable
		s.Missing = data &^ readable
		// A rebuilding member's rows the new parity stands for are
		// written to it too (md writes every member not faulty): the
		// stripe is then consistent on every member whatever the
		// rebuild does with it, which may have passed it over as never
		// written a moment before and mark it rebuilt after.
		s.Writes |= s.Missing & rebuilding
	}
	return s
}

// StripeReadSegment is one part of a read of a stripe: rows [Lo, Hi) over
// which the same data chunks are asked for. Wanted: those data members;
// Reads: the members to read (Wanted when all are readable; otherwise
// every readable data member and as many parity members as data members
// are lost, to rebuild the Missing ones, which are wanted and unreadable).
type StripeReadSegment struct {
	Lo, Hi                 uint64
	Wanted, Reads, Missing uint64
}

// PlanStripeRead plans a read of array sectors [sector, sector+sectors)
// within one stripe, appending the segments to segs: direct reads of the
// data chunks where they are readable, and where one is not, a read of
// enough other chunks (P before Q) to rebuild it, as md's degraded reads
// do. Readable as for PlanStripeWrite.
func (g ParityGeometry) PlanStripeRead(st *ArrayState, sector uint64, sectors uint32, segs []StripeReadSegment) ([]StripeReadSegment, error) {
	return g.planRead(st, 0, sector, sectors, segs)
}

// planRead is PlanStripeRead with the members in avoid taken as
// unreadable.
func (g ParityGeometry) planRead(st *ArrayState, avoid uint64, sector uint64, sectors uint32, segs []StripeReadSegment) ([]StripeReadSegment, error) {
	if sectors == 0 {
		return segs, nil
	}
	v, err := g.view(st, avoid, sector, sectors)
	if err != nil {
		return segs, fmt.Errorf("read: %w", err)
	}
	m, stripe, readable, data := v.m, v.stripe, v.readable, v.data
	g.forEachRun(&m, v.first, v.last, func(a, b, wanted uint64) {
		seg := StripeReadSegment{Lo: a, Hi: b, Wanted: wanted, Reads: wanted}
		if seg.Missing = wanted &^ readable; seg.Missing != 0 {
			lost := bits.OnesCount64(data &^ readable)
			seg.Reads = data & readable
			for _, pm := range [2]int{m.P, m.Q} {
				if lost > 0 && pm >= 0 && readable&(1<<uint(pm)) != 0 {
					seg.Reads |= 1 << uint(pm)
					lost--
				}
			}
			if lost > 0 && err == nil {
				err = fmt.Errorf("stripe %d: %w", stripe, ErrStripeLost)
			}
		}
		segs = append(segs, seg)
	})
	if err != nil {
		return segs, err
	}
	return segs, nil
}

// sortUint64 sorts a few values (insertion sort: no allocation).
func sortUint64(v []uint64) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}
