package engine

import (
	"testing"

	"pgregory.net/rapid"
)

// genReverseGeometry draws raid0, raid1 or raid10 n/f/o with 2..6 members
// and 2..3 copies, small or large.
func genReverseGeometry(t *rapid.T) Geometry {
	g := Geometry{Level: rapid.SampledFrom([]Level{Level0, Level1, Level10}).Draw(t, "level")}
	switch g.Level {
	case Level0:
		g.Members = rapid.IntRange(2, 6).Draw(t, "members")
	case Level1:
		g.Members = rapid.IntRange(2, 3).Draw(t, "members")
	case Level10:
		g.Layout = rapid.SampledFrom(allLayouts).Draw(t, "layout")
		g.Members = rapid.IntRange(g.Layout.Copies(), 6).Draw(t, "members")
	}
	g.ChunkSectors = MinChunkSectors << rapid.IntRange(0, 14).Draw(t, "chunkShift")
	minChunks := uint64(max(g.Layout.Far, 1))
	maxChunks := rapid.SampledFrom([]uint64{8, 100, MaxMemberSectors / MaxChunkSectors}).Draw(t, "maxChunks")
	chunks := rapid.Uint64Range(minChunks, maxChunks).Draw(t, "memberChunks")
	g.MemberSectors = min(chunks*g.ChunkSectors+rapid.Uint64Range(0, g.ChunkSectors-1).Draw(t, "extra"), MaxMemberSectors)
	if err := g.Validate(); err != nil {
		t.Fatalf("%s: %v", g.name(), err)
	}
	return g
}

// TestArraySectorOfProperties: every copy Locate returns maps back to its
// array sector, and every member sector ArraySectorOf maps is one of the
// copies Locate returns for it.
func TestArraySectorOfProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genReverseGeometry(t)
		size := g.ArraySectors()
		var buf [MaxCopies]Location
		for range 30 {
			s := rapid.Uint64Range(0, size-1).Draw(t, "arraySector")
			for _, l := range g.Locate(s, buf[:0]) {
				got, ok := g.ArraySectorOf(l.Member, l.Sector)
				if !ok || got != s {
					t.Fatalf("%s: Locate(%d) has %v but ArraySectorOf(%d, %d) = %d, %v", g.name(), s, l, l.Member, l.Sector, got, ok)
				}
			}
		}
		for range 30 {
			m := rapid.IntRange(0, g.Members-1).Draw(t, "member")
			ms := rapid.Uint64Range(0, g.MemberSectors+g.ChunkSectors).Draw(t, "memberSector")
			a, ok := g.ArraySectorOf(m, ms)
			if !ok {
				continue
			}
			if a >= size {
				t.Fatalf("%s: ArraySectorOf(%d, %d) = %d, beyond the array (%d)", g.name(), m, ms, a, size)
			}
			found := false
			for _, l := range g.Locate(a, buf[:0]) {
				found = found || l == Location{Member: m, Sector: ms}
			}
			if !found {
				t.Fatalf("%s: ArraySectorOf(%d, %d) = %d but Locate(%d) = %v", g.name(), m, ms, a, a, g.Locate(a, buf[:0]))
			}
		}
	})
}

// TestArraySectorOfExhaustive: on small arrays, the member sectors that map
// are exactly the ones Locate uses, so a rebuild walking a member's sectors
// covers every copy the member holds.
func TestArraySectorOfExhaustive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGeometry(t, 3, 12)
		if g.Members > 6 {
			t.Skip()
		}
		used := make([]bool, uint64(g.Members)*g.MemberSectors)
		var buf [MaxCopies]Location
		for s := range g.ArraySectors() {
			for _, l := range g.Locate(s, buf[:0]) {
				used[uint64(l.Member)*g.MemberSectors+l.Sector] = true
			}
		}
		for m := range g.Members {
			for ms := range g.MemberSectors {
				a, ok := g.ArraySectorOf(m, ms)
				if ok != used[uint64(m)*g.MemberSectors+ms] {
					t.Fatalf("%s: ArraySectorOf(%d, %d) = %d, %v but Locate uses it: %v", g.name(), m, ms, a, ok, !ok)
				}
			}
		}
	})
}

func TestArraySectorOfDoesNotAllocate(t *testing.T) {
	for _, g := range benchGeometries() {
		if n := testing.AllocsPerRun(100, func() { g.ArraySectorOf(1, 12345) }); n != 0 {
			t.Errorf("%s: %v allocs", g.name(), n)
		}
	}
}
