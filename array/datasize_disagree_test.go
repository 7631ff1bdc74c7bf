package array

import (
	"errors"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review: a member whose superblock, at the freshest generation,
// records a smaller data size than the other members (valid checksum,
// within its device) silently shrank the array, and for raid10 far moved
// the far copies: what was written read back different. Members of one
// generation that disagree on the data size are now refused, writing
// nothing; md takes the array's size from the freshest superblock and does
// not let one device's record move the data.
func TestSmallerDataSizeOnOneMemberRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		level  engine.Level
		layout engine.Layout
		chunk  uint64
	}{
		{"raid1", engine.Level1, engine.Layout{}, 0},
		{"raid10f2", engine.Level10, engine.LayoutF2, 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := memberFiles(t, 2, 32<<20)
			a, err := Open(paths, CreateSpec{Name: "t", Level: tc.level, Layout: tc.layout, ChunkSectors: tc.chunk, AssumeClean: true, RegionSectors: testRegion}, true)
			if err != nil {
				t.Fatal(err)
			}
			g0 := a.Engine.Geo
			want := g0.ArraySectors()
			stop(t, a)
			sb := superblockOf(t, paths[1])
			sb.DataSectors /= 2
			putSuperblock(t, paths[1], sb)
			before := fileBytes(t, paths...)
			b, err := Open(paths, CreateSpec{}, false)
			if err != nil {
				if !errors.Is(err, engine.ErrCorruptArray) {
					t.Errorf("refused with %v, want ErrCorruptArray", err)
				}
				if !slices2DEqual(before, fileBytes(t, paths...)) {
					t.Fatal("refused assembly wrote")
				}
				return
			}
			defer b.Close()
			got := b.Engine.Geo.ArraySectors()
			if got != want {
				t.Errorf("array size %d sectors after assembly, created as %d: one member's data-size record shrank it (warnings %v)", got, want, b.Warnings)
			}
			if err := b.SetClean(false); err != nil {
				t.Fatal(err)
			}
			if g1 := b.Engine.Geo; tc.level == engine.Level10 {
				l0 := g0.Locate(0, nil)
				l1 := g1.Locate(0, nil)
				if len(l0) == len(l1) {
					for i := range l0 {
						if l0[i] != l1[i] {
							t.Errorf("array sector 0's copy %d was at %+v, is now read from %+v: the far copies moved", i, l0[i], l1[i])
						}
					}
				}
			}
			if s0 := superblockOf(t, paths[0]); s0.DataSectors != before0(t, before[0]) {
				t.Errorf("member 0's superblock now records %d sectors (was %d): the shrink is made permanent", s0.DataSectors, before0(t, before[0]))
			}
		})
	}
}

func before0(t *testing.T, b []byte) uint64 {
	sb, err := engine.ParseSuperblock(b[engine.SuperblockOffset:])
	if err != nil {
		t.Fatal(err)
	}
	return sb.DataSectors
}
