package engine

import (
	"strings"
	"testing"
)

// A raid5/6 array assembles with up to one (two) roles lost and is failed
// with more; a rebuilding role counts as lost, as in md's degraded count.
func TestAssembleParityFailed(t *testing.T) {
	clean := func(sb *Superblock) { sb.Clean = true }
	r5 := asmNext(asmNewArray(t, 5, uint32(LeftSymmetric), 4, 0), clean)
	a := mustAssemble(t, asmInputs(t, r5...))
	if a.Level != 5 || a.Layout != uint32(LeftSymmetric) || a.ChunkSectors != 1024 {
		t.Fatalf("raid5 assembled as level %d layout %d chunk %d", a.Level, a.Layout, a.ChunkSectors)
	}
	asmWantCounts(t, a, 4, 0, 0, 0, false, false)
	a = mustAssemble(t, asmInputs(t, r5[0], r5[1], r5[3]))
	asmWantCounts(t, a, 3, 0, 0, 1, true, false)
	a = mustAssemble(t, asmInputs(t, r5[0], r5[3]))
	asmWantCounts(t, a, 2, 0, 0, 2, true, true)

	rb := asmNext(r5, func(sb *Superblock) {
		sb.Roles[1] = RoleEntry{State: RoleRebuilding, RecoveryOffset: 8, Member: sb.Roles[1].Member}
		sb.Roles[2].State = RoleFaulty
		sb.Clean = true
	})
	a = mustAssemble(t, asmInputs(t, rb[0], rb[1], rb[3]))
	asmWantCounts(t, a, 2, 1, 1, 0, true, true)

	r6 := asmNext(asmNewArray(t, 6, uint32(RightAsymmetric), 5, 1), clean)
	a = mustAssemble(t, asmInputs(t, r6...))
	if a.Level != 6 || a.Layout != uint32(RightAsymmetric) || len(a.Spares) != 1 {
		t.Fatalf("raid6 assembled as level %d layout %d, spares %v", a.Level, a.Layout, a.Spares)
	}
	a = mustAssemble(t, asmInputs(t, r6[0], r6[2], r6[4]))
	asmWantCounts(t, a, 3, 0, 0, 2, true, false)
	a = mustAssemble(t, asmInputs(t, r6[0], r6[4]))
	asmWantCounts(t, a, 2, 0, 0, 3, true, true)
}

// A raid5/6 array not stopped cleanly is refused degraded (md's "cannot
// start dirty degraded array"), and started with force; with the
// write-hole log it is let through, marked DirtyDegraded; whole, or
// clean, it is not refused; raid1 is never.
func TestAssembleParityDirtyDegraded(t *testing.T) {
	for _, level := range []uint32{5, 6} {
		dirty := asmNewArray(t, level, uint32(LeftSymmetric), 5, 0) // as written while running
		a := mustAssemble(t, asmInputs(t, dirty...))
		asmWantCounts(t, a, 5, 0, 0, 0, false, false)
		_, err := AssembleWith(asmInputs(t, dirty[0], dirty[1], dirty[3], dirty[4]), AssembleOptions{})
		asmWantErr(t, err, ErrDirtyDegraded, "was not stopped cleanly", "1 of its 5 roles")
		a, err = AssembleWith(asmInputs(t, dirty[0], dirty[1], dirty[3], dirty[4]), AssembleOptions{Force: true})
		if err != nil {
			t.Fatalf("raid%d forced: %v", level, err)
		}
		asmWantCounts(t, a, 4, 0, 0, 1, true, false)
		// A rebuilding role is not in sync either.
		rb := asmNext(dirty, func(sb *Superblock) {
			sb.Roles[2] = RoleEntry{State: RoleRebuilding, RecoveryOffset: 64, Member: sb.Roles[2].Member}
		})
		_, err = AssembleWith(asmInputs(t, rb...), AssembleOptions{})
		asmWantErr(t, err, ErrDirtyDegraded)
		// With the write-hole log it is let through, marked for the
		// caller to refuse unless the log replays every entry.
		logged := asmNext(dirty, func(sb *Superblock) { sb.LogBytes, sb.LogOffset = 1<<20, sb.DataOffset-1<<20 })
		a, err = AssembleWith(asmInputs(t, logged[0], logged[1], logged[3], logged[4]), AssembleOptions{})
		if err != nil || !a.DirtyDegraded {
			t.Fatalf("raid%d dirty degraded with the log: %v, marked %v", level, err, a != nil && a.DirtyDegraded)
		}
		if a = mustAssemble(t, asmInputs(t, logged...)); a.DirtyDegraded {
			t.Fatalf("raid%d whole marked dirty degraded", level)
		}
		clean := asmNext(dirty, func(sb *Superblock) { sb.Clean = true })
		a = mustAssemble(t, asmInputs(t, clean[0], clean[1], clean[3], clean[4]))
		asmWantCounts(t, a, 4, 0, 0, 1, true, false)
	}
	r1 := asmNewArray(t, 1, 0, 2, 0)
	a := mustAssemble(t, asmInputs(t, r1[0]))
	asmWantCounts(t, a, 1, 0, 0, 1, true, false)
}

// NewSuperblocks refuses a parity array that its own validation refuses:
// too few members, a layout that is not md's 0..3, no chunk.
func TestNewSuperblocksParityRejects(t *testing.T) {
	for _, tc := range []struct {
		level, layout, chunk uint32
		members              int
		want                 string
	}{
		{5, 2, 1024, 2, "RAID 5 with 2 members: it needs at least 3"},
		{6, 2, 1024, 3, "RAID 6 with 3 members: it needs at least 4"},
		{5, 4, 1024, 4, "RAID 5 layout 0x4"},
		{6, 0x102, 1024, 4, "RAID 6 layout 0x102"},
		{5, 2, 0, 4, "chunk of 0 sectors"},
		{6, 2, 12, 4, "chunk of 12 sectors"},
	} {
		spec := ArraySpec{Name: "p", Level: tc.level, Layout: tc.layout, ChunkSectors: tc.chunk}
		for range tc.members {
			spec.MemberBytes = append(spec.MemberBytes, asmGiB)
		}
		if _, err := NewSuperblocks(spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc, err, tc.want)
		}
	}
}

// ParityGeometryOf maps every valid raid5/6 superblock to a geometry its
// Validate accepts (the superblock's bounds are no looser than the
// geometry's, but the chunk's upper bound and the member size, which the
// array checks when it builds the geometry).
func TestParityGeometryOf(t *testing.T) {
	for _, level := range []uint32{5, 6} {
		for layout := range uint32(4) {
			sbs := asmNewArray(t, level, layout, 4, 0)
			g := ParityGeometryOf(sbs[0], sbs[0].DataSectors)
			if err := g.Validate(); err != nil {
				t.Errorf("raid%d layout %d: %v", level, layout, err)
			}
			if g.Layout.String() != parityLayoutNames[layout] || g.Level != Level(level) || g.Members != 4 {
				t.Errorf("raid%d layout %d: %+v", level, layout, g)
			}
		}
	}
}
