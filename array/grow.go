package array

import (
	"errors"
	"fmt"
	"math"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

// ErrGrowNoChange is GrowCheck's answer when the array already has the
// size asked for: nothing to do.
var ErrGrowNoChange = errors.New("the array already has that size")

// GrowPlan is what a grow would do: each member's data area (md's
// component size) and the array's size, before and after.
type GrowPlan struct {
	OldMemberSectors, NewMemberSectors uint64
	OldArraySectors, NewArraySectors   uint64
	// MaxMemberSectors is the largest data area every member allows.
	MaxMemberSectors uint64
}

// GrowCheck says whether the array can grow each member's data area to
// memberSectors (0: the largest every member allows, like mdadm --grow
// --size=max), rounded down to 4 KiB (raid5/6: to the chunk), and what
// that gives. It reads and
// writes nothing but the in-memory state. Refused: raid0 (md needs a
// reshape for that), raid10 far layouts (their copies' places depend on
// the member size; md's raid10_resize refuses them too: an offset
// layout's far copies are a chunk apart and grow as near), a degraded array or one with a rebuild,
// resync or check running or pending (when running is set: the array is
// serving), a member or a spare too small for the new size, and a
// shrink. ErrGrowNoChange when the size is already that.
func (a *Array) GrowCheck(memberSectors uint64, running bool) (GrowPlan, error) {
	g := a.Engine.Geo
	p := GrowPlan{OldMemberSectors: a.Engine.MemberSectors(), OldArraySectors: a.Engine.ArraySectors()}
	switch {
	case a.Engine.Parity != nil:
	case g.Level == engine.Level0:
		return p, errors.New("a raid0 array cannot grow its size (md needs a reshape to add space to raid0)")
	case g.Level == engine.Level10 && g.Layout.Far > 1 && !g.Layout.Offset:
		return p, fmt.Errorf("a raid10 %s array cannot grow its size: the far layouts place copies by the member size (near and offset layouts grow, as md's)", g.Layout)
	case g.Level != engine.Level1 && g.Level != engine.Level10:
		return p, fmt.Errorf("a raid%d array cannot grow its size", g.Level)
	}
	st := a.Engine.State()
	for r, m := range st.Members {
		if m.State != engine.MemberActive || a.Members[r] == nil {
			return p, fmt.Errorf("role %d is %s: grow needs every member in sync (re-add or replace it first)", r, m.State)
		}
	}
	if running {
		if s := a.SyncStatus(); s.Action != "idle" || s.Settling || s.ResyncNeeded {
			what := s.Action
			if what == "idle" {
				what = "a resync is pending"
			} else {
				what = "a " + what + " is running"
			}
			return p, fmt.Errorf("%s: grow waits until it ends (detail --wait)", what)
		}
	}
	p.MaxMemberSectors = engine.MaxMemberSectors
	var small *Member
	var smallSize int64
	a.mu.Lock()
	members := append([]*Member(nil), a.Members...)
	spares := append([]spareMember(nil), a.spares...)
	a.mu.Unlock()
	for _, m := range members {
		size := currentSize(m)
		have := uint64(0)
		if uint64(size) > a.dataOffset {
			have = (uint64(size) - a.dataOffset) >> 9 &^ 7
		}
		if have < p.MaxMemberSectors {
			p.MaxMemberSectors, small, smallSize = have, m, size
		}
	}
	// A parity array uses whole chunks of each member (md rounds its
	// component size down to the chunk).
	unit := uint64(8)
	if pg := a.Engine.Parity; pg != nil {
		unit = max(unit, pg.ChunkSectors)
	}
	p.MaxMemberSectors -= p.MaxMemberSectors % unit
	want := memberSectors - memberSectors%unit
	if memberSectors == 0 {
		want = p.MaxMemberSectors
	}
	if want > p.MaxMemberSectors && small == nil {
		// Every member allows more than the largest data area there is.
		return p, fmt.Errorf("a member's data area is at most %d bytes; asked for %d", p.MaxMemberSectors<<9, want<<9)
	}
	if want > p.MaxMemberSectors {
		return p, fmt.Errorf("%s allows a data area of at most %d bytes (it is %d bytes, the data starts at byte %d); asked for %d",
			small.Path, p.MaxMemberSectors<<9, smallSize, a.dataOffset, want<<9)
	}
	// (A parity array's data area may end in a part of a chunk it does
	// not use: the same whole chunks are no change.)
	if old := a.Engine.MemberSectors(); want < old-old%unit {
		return p, fmt.Errorf("each member gives the array %d bytes; shrinking to %d is refused (a filesystem on the array would lose its end)", old<<9, want<<9)
	}
	var validate func() error
	if pg := a.Engine.Parity; pg != nil {
		ng := *pg
		ng.MemberSectors = want
		p.NewArraySectors, validate = ng.ArraySectors(), ng.Validate
	} else {
		ng := g
		ng.MemberSectors = want
		p.NewArraySectors, validate = ng.ArraySectors(), ng.Validate
	}
	p.NewMemberSectors = want
	if p.NewArraySectors == p.OldArraySectors {
		return p, ErrGrowNoChange
	}
	if err := validate(); err != nil {
		return p, err
	}
	for _, sp := range spares {
		if size := currentSize(sp.m); uint64(size) < a.dataOffset+want<<9 {
			return p, fmt.Errorf("spare %s is %d bytes; the grown array needs %d of each member: remove it first (remove -n N %s)",
				sp.m.Path, size, a.dataOffset+want<<9, sp.m.Path)
		}
	}
	if a.Bitmap != nil {
		var err error
		a.withBitmap(func() { _, err = a.Bitmap.Grown(p.NewArraySectors) })
		if err != nil {
			return p, fmt.Errorf("write-intent bitmap: %w", err)
		}
	}
	return p, nil
}

// currentSize is m's size now: a device grown in place since it was
// opened (lvextend, a resized virtual disk) shows its new size, which
// the assembly that grow does next sees too. Devices that cannot say keep
// the size they were opened with.
func currentSize(m *Member) int64 {
	if r, ok := m.Device.(interface{ CurrentSize() (int64, error) }); ok {
		if n, err := r.CurrentSize(); err == nil {
			return n
		}
	}
	return m.Size
}

// withBitmap runs fn on the bitmap's flusher (or here without one).
func (a *Array) withBitmap(fn func()) {
	a.mu.Lock()
	fl := a.fl
	a.mu.Unlock()
	if fl != nil {
		fl.do(fn)
		return
	}
	fn()
}

// writeGrownHeader writes the grown bitmap's header, durably, on every
// member before its data blocks are rewritten with a doubled region size.
// A data block does not record the region size: a cut while they are
// rewritten must not leave the old header over new-layout blocks (old
// regions would read clean or never written over data that needs a sync).
// The new header names the grown size, which the superblocks do not hold
// yet: until they do, assembly finds it does not match and takes that
// copy as all dirty.
func (a *Array) writeGrownHeader(nb *bitmap.Bitmap) error {
	g := nb.Geometry()
	buf, free, err := alignedBuf(int(g.BlockSize))
	if err != nil {
		return err
	}
	bitmap.EncodeHeader(buf, &g, nb.Events(), nb.EventsCleared())
	members := a.Members
	var roles []int
	for r, m := range members {
		if m != nil {
			roles = append(roles, r)
		}
	}
	errs := writeAll(members, roles, a.MemberTimeout, func(r int) error {
		return writeBitmapBlock(members[r], buf, int64(g.BlockOffset(0)))
	})
	for _, err := range errs {
		if errors.Is(err, errMemberTimeout) {
			return err // buf stays with the late write: never reused
		}
	}
	free()
	return errors.Join(errs...)
}

// Grow grows each member's data area to memberSectors (0: the most every
// member allows) on an array that does not serve I/O yet: assembled by
// Open, before it is given to ublk and before StartBackground. Nothing
// is written unless GrowCheck (not running) passes. Then, in this order,
// each durable on every member before the next:
//
//  1. the bitmap, grown (the added regions never written, so no initial
//     sync; the region size doubled where the area cannot hold the
//     regions otherwise), rewritten whole, its header at the new
//     generation;
//  2. the superblocks at that generation, with the new data area.
//
// A crash between the two, or one that tears the superblock update,
// assembles at the old size (the smallest data area of the members wins)
// with every bitmap region dirty, as for a bitmap that does not match
// (a full resync, nothing lost); a crash after both assembles the grown
// array. The caller then tells the kernel the new size.
func (a *Array) Grow(memberSectors uint64) (GrowPlan, error) {
	p, err := a.GrowCheck(memberSectors, false)
	if err != nil {
		return p, err
	}
	if a.Bitmap != nil {
		var nb *bitmap.Bitmap
		a.withBitmap(func() { nb, err = a.Bitmap.Grown(p.NewArraySectors) })
		if err != nil {
			return p, fmt.Errorf("write-intent bitmap: %w", err)
		}
		// The old flusher ends; the new one's first batches rewrite the
		// whole grown copy, and the superblock update below waits for
		// its header.
		a.mu.Lock()
		fl := a.fl
		a.fl = nil
		a.mu.Unlock()
		if fl != nil {
			fl.close()
		}
		if nb.Geometry().RegionSectors != a.Bitmap.Geometry().RegionSectors {
			if err := a.writeGrownHeader(nb); err != nil {
				a.start() // the old bitmap goes on: nothing else was written
				return p, fmt.Errorf("write-intent bitmap: %w", err)
			}
		}
		a.mu.Lock() // (a persist under way reads it)
		a.Bitmap = nb
		a.mu.Unlock()
		a.start()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := make([]uint64, len(a.SBs))
	for r, sb := range a.SBs {
		old[r] = sb.DataSectors
		sb.DataSectors = p.NewMemberSectors
	}
	a.setMemberSectors(p.NewMemberSectors)
	var wasPending bool
	var wasPos uint64
	if a.Bitmap == nil && a.sync != nil {
		// The added space holds whatever the members held there: copies
		// that differ, parity that does not match. Without a bitmap to
		// say it was never written, a resync makes it agree, from the
		// old end (or from where a pending one is), as md resyncs a grown
		// raid1/10/5 from its old size. Until it gets there, reads there
		// go to one chosen copy and writes treat those stripes as
		// unsynced (no read-modify-write over their parity), and the
		// superblocks written below record the array unclean.
		wasPending, wasPos = a.sync.fullPending, a.sync.fullPos
		if !a.sync.fullPending || a.sync.fullPos > p.OldArraySectors {
			a.sync.fullPending, a.sync.fullPos = true, p.OldArraySectors
		}
		a.sync.from.Store(min(a.sync.from.Load(), a.sync.fullPos))
	}
	if err := a.writeSuperblocks(a.Engine.State(), false); err != nil {
		// Some members may hold the new size: the smallest recorded
		// wins at the next assembly. This run stays at the old size.
		for r, sb := range a.SBs {
			sb.DataSectors = min(sb.DataSectors, old[r])
		}
		a.setMemberSectors(p.OldMemberSectors)
		if a.Bitmap == nil && a.sync != nil {
			a.sync.fullPending, a.sync.fullPos = wasPending, wasPos
			if wasPending {
				a.sync.from.Store(wasPos)
			} else {
				a.sync.from.Store(math.MaxUint64)
			}
		}
		return p, fmt.Errorf("superblocks: %w", err)
	}
	return p, nil
}

// setMemberSectors sets the data area of each member's role (not serving:
// the queues copy the geometry when they start).
func (a *Array) setMemberSectors(n uint64) {
	if pg := a.Engine.Parity; pg != nil {
		pg.MemberSectors = n
		return
	}
	a.Engine.Geo.MemberSectors = n
}
