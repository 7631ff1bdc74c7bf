package engine

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// ---------------------------------------------------------------------------
// Reference: a plain transcription of md's mapping code (drivers/md/raid0.c,
// raid10.c in Linux 6.12), loop for loop, kept apart from the implementation
// under test so that the two can be compared.

// mdGeom mirrors raid10's struct geom plus the conf fields the mapping uses.
type mdGeom struct {
	raidDisks  int
	nearCopies int
	farCopies  int
	farOffset  bool
	farSetSize int
	chunkMask  uint64
	chunkShift uint
	stride     uint64
	copies     int
	devSectors uint64 // conf->dev_sectors after calc_sectors
}

// mdRaid10Setup does what setup_geo (geo_new, layout version 0) and
// calc_sectors do for an array of g.Members members of g.MemberSectors.
func mdRaid10Setup(g Geometry) mdGeom {
	layout := g.Layout.MD()
	chunk := g.ChunkSectors
	var geo mdGeom
	nc := int(layout & 255)
	fc := int((layout >> 8) & 255)
	fo := layout&(1<<16) != 0
	geo.raidDisks = g.Members
	geo.nearCopies = nc
	geo.farCopies = fc
	geo.farOffset = fo
	if layout>>17 != 0 {
		panic("reference: only layout version 0")
	}
	geo.farSetSize = g.Members
	geo.chunkMask = chunk - 1
	for uint64(1)<<geo.chunkShift != chunk {
		geo.chunkShift++ // ffz(~chunk)
	}
	geo.copies = nc * fc

	// calc_sectors(conf, mddev->dev_sectors)
	size := g.MemberSectors >> geo.chunkShift
	size /= uint64(geo.farCopies)
	size *= uint64(geo.raidDisks)
	size /= uint64(geo.nearCopies)
	// 'size' is now the number of chunks in the array
	size *= uint64(geo.copies)
	size = (size + uint64(geo.raidDisks) - 1) / uint64(geo.raidDisks) // DIV_ROUND_UP
	geo.devSectors = size << geo.chunkShift
	if geo.farOffset {
		geo.stride = 1 << geo.chunkShift
	} else {
		size /= uint64(geo.farCopies)
		geo.stride = size << geo.chunkShift
	}
	return geo
}

// mdRaid10Size is raid10_size(mddev, 0, 0) as raid10_run calls it, after
// mddev->dev_sectors = conf->dev_sectors.
func mdRaid10Size(geo mdGeom) uint64 {
	size := geo.devSectors >> geo.chunkShift
	size /= uint64(geo.farCopies)
	size *= uint64(geo.raidDisks)
	size /= uint64(geo.nearCopies)
	return size << geo.chunkShift
}

// mdRaid10FindPhys is __raid10_find_phys: the devs[] slots of one sector.
func mdRaid10FindPhys(geo mdGeom, virt uint64) []Location {
	var devs []Location
	lastFarSetStart := (geo.raidDisks / geo.farSetSize) - 1
	lastFarSetStart *= geo.farSetSize
	lastFarSetSize := geo.farSetSize
	lastFarSetSize += geo.raidDisks % geo.farSetSize

	chunk := virt >> geo.chunkShift
	sector := virt & geo.chunkMask
	chunk *= uint64(geo.nearCopies)
	stripe := chunk
	dev := int(stripe % uint64(geo.raidDisks)) // sector_div
	stripe /= uint64(geo.raidDisks)
	if geo.farOffset {
		stripe *= uint64(geo.farCopies)
	}
	sector += stripe << geo.chunkShift

	for n := 0; n < geo.nearCopies; n++ {
		d := dev
		s := sector
		devs = append(devs, Location{Member: d, Sector: s})
		for f := 1; f < geo.farCopies; f++ {
			set := d / geo.farSetSize
			d += geo.nearCopies
			if geo.raidDisks%geo.farSetSize != 0 && d > lastFarSetStart {
				d -= lastFarSetStart
				d %= lastFarSetSize
				d += lastFarSetStart
			} else {
				d %= geo.farSetSize
				d += geo.farSetSize * set
			}
			s += geo.stride
			devs = append(devs, Location{Member: d, Sector: s})
		}
		dev++
		if dev >= geo.raidDisks {
			dev = 0
			sector += geo.chunkMask + 1
		}
	}
	return devs
}

// mdRaid0Zone is create_strip_zones for equal members: one strip zone over
// all of them, each member's size rounded down to whole chunks.
type mdRaid0Zone struct {
	nbDev   int
	zoneEnd uint64
	chunk   uint64
}

func mdRaid0Setup(g Geometry) mdRaid0Zone {
	sectors := g.MemberSectors / g.ChunkSectors * g.ChunkSectors
	var size uint64
	for range g.Members {
		size += sectors // raid0_size: sum of the rounded member sizes
	}
	return mdRaid0Zone{nbDev: g.Members, zoneEnd: size, chunk: g.ChunkSectors}
}

// mdRaid0Map is map_sector for zone 0 (power-of-two chunk).
func mdRaid0Map(z mdRaid0Zone, sector uint64) Location {
	chunkSects := z.chunk
	chunksectBits := uint(0)
	for uint64(1)<<chunksectBits != chunkSects {
		chunksectBits++
	}
	sectorOffset := sector // zone 0 starts at array sector 0
	sectInChunk := sector & (chunkSects - 1)
	sector >>= chunksectBits
	chunk := sectorOffset / (uint64(z.nbDev) << chunksectBits)
	sectorOffset = chunk*chunkSects + sectInChunk
	return Location{Member: int(sector % uint64(z.nbDev)), Sector: sectorOffset}
}

// mdRef maps like md: the array size and every copy of a sector.
func mdArraySectors(g Geometry) uint64 {
	switch g.Level {
	case Level0:
		return mdRaid0Setup(g).zoneEnd
	case Level1:
		return g.MemberSectors
	default:
		return mdRaid10Size(mdRaid10Setup(g))
	}
}

func mdLocate(g Geometry, s uint64) []Location {
	switch g.Level {
	case Level0:
		return []Location{mdRaid0Map(mdRaid0Setup(g), s)}
	case Level1:
		var l []Location
		for m := 0; m < g.Members; m++ {
			l = append(l, Location{Member: m, Sector: s})
		}
		return l
	default:
		return mdRaid10FindPhys(mdRaid10Setup(g), s)
	}
}

// mdIOOpt is md's optimal_io_size in sectors (raid0_set_limits,
// raid10_set_queue_limits with raid10_nr_stripes).
func mdIOOpt(g Geometry) uint64 {
	switch g.Level {
	case Level0:
		return g.ChunkSectors * uint64(g.Members)
	case Level10:
		stripes := g.Members
		if g.Members%g.Layout.Near == 0 {
			stripes = g.Members / g.Layout.Near
		}
		return g.ChunkSectors * uint64(stripes)
	}
	return 0
}

// ---------------------------------------------------------------------------

var allLayouts = []Layout{LayoutN2, LayoutN3, LayoutF2, LayoutF3, LayoutO2, LayoutO3}

func equalLocs(a, b []Location) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (g Geometry) name() string {
	l := ""
	if g.Level == Level10 {
		l = " " + g.Layout.String()
	}
	return fmt.Sprintf("%s%s x%d chunk %d member %d", g.Level, l, g.Members, g.ChunkSectors, g.MemberSectors)
}

// TestLocatePictures checks layouts drawn as md's documentation draws them:
// one string per member chunk row, one letter per member, the letter naming
// the array chunk stored there ('.' unused). Copies come in slot order, which
// for all of md's layouts is the order the picture shows them in, row by row.
func TestLocatePictures(t *testing.T) {
	tests := []struct {
		level   Level
		layout  Layout
		picture []string
	}{
		{Level0, Layout{}, []string{"ABC", "DEF"}},
		{Level0, Layout{}, []string{"AB", "CD", "EF"}},
		{Level1, Layout{}, []string{"AA", "BB"}},
		{Level1, Layout{}, []string{"AAA", "BBB"}},
		{Level10, LayoutN2, []string{"AABB", "CCDD", "EEFF"}},
		{Level10, LayoutN2, []string{"AAB", "BCC", "DDE", "EFF"}},
		{Level10, LayoutN2, []string{"AA", "BB"}},
		{Level10, LayoutN2, []string{"AABBC", "CDDEE", "FFGGH", "HIIJJ"}},
		{Level10, LayoutN3, []string{"AAAB", "BBCC", "CDDD"}},
		{Level10, LayoutN3, []string{"AAA", "BBB"}},
		{Level10, LayoutF2, []string{"AB", "BA"}},
		{Level10, LayoutF2, []string{"ABC", "DEF", "CAB", "FDE"}},
		{Level10, LayoutF2, []string{"ABCD", "EFGH", "DABC", "HEFG", "...."}},
		{Level10, LayoutF3, []string{"ABCD", "DABC", "CDAB"}},
		{Level10, LayoutF3, []string{"ABC", "DEF", "CAB", "FDE", "BCA", "EFD", "..."}},
		{Level10, LayoutO2, []string{"AB", "BA", "CD", "DC"}},
		{Level10, LayoutO2, []string{"ABC", "CAB", "DEF", "FDE"}},
		{Level10, LayoutO2, []string{"ABCD", "DABC", "EFGH", "HEFG", "...."}},
		{Level10, LayoutO3, []string{"ABCD", "DABC", "CDAB"}},
		{Level10, LayoutO3, []string{"ABC", "CAB", "BCA", "DEF", "FDE", "EFD", "...", "..."}},
	}
	const chunk = 8
	for _, tt := range tests {
		for _, extra := range []uint64{0, 1, chunk - 1} {
			g := Geometry{
				Level:         tt.level,
				Members:       len(tt.picture[0]),
				Layout:        tt.layout,
				ChunkSectors:  chunk,
				MemberSectors: uint64(len(tt.picture))*chunk + extra,
			}
			if tt.level == Level1 {
				g.MemberSectors -= extra // raid1 has no chunks: no unused tail
			}
			t.Run(g.name(), func(t *testing.T) {
				if err := g.Validate(); err != nil {
					t.Fatal(err)
				}
				// Where each array chunk is, in row-major order.
				want := map[byte][]Location{}
				for row, line := range tt.picture {
					for m := range len(line) {
						if c := line[m]; c != '.' {
							want[c] = append(want[c], Location{Member: m, Sector: uint64(row) * chunk})
						}
					}
				}
				if got := g.ArraySectors(); got != uint64(len(want))*chunk {
					t.Fatalf("ArraySectors() = %d, want %d (%d chunks)", got, len(want)*chunk, len(want))
				}
				var buf [MaxCopies]Location
				for c := byte('A'); c < 'A'+byte(len(want)); c++ {
					for k := range uint64(chunk) {
						s := uint64(c-'A')*chunk + k
						got := g.Locate(s, buf[:])
						exp := make([]Location, len(want[c]))
						for i, l := range want[c] {
							exp[i] = Location{Member: l.Member, Sector: l.Sector + k}
						}
						if !equalLocs(got, exp) {
							t.Fatalf("Locate(%d) (chunk %c) = %v, want %v", s, c, got, exp)
						}
					}
				}
			})
		}
	}
}

// testGeometries lists small geometries of every level and layout md allows,
// with 2 to 6 members.
func testGeometries(chunks []uint64, memberChunks []uint64, extras func(chunk uint64) []uint64) []Geometry {
	var gs []Geometry
	add := func(g Geometry) {
		for _, c := range chunks {
			for _, mc := range memberChunks {
				for _, x := range extras(c) {
					g.ChunkSectors = c
					g.MemberSectors = mc*c + x
					if g.Validate() == nil {
						gs = append(gs, g)
					}
				}
			}
		}
	}
	for n := 2; n <= 6; n++ {
		add(Geometry{Level: Level0, Members: n})
		add(Geometry{Level: Level1, Members: n})
		for _, l := range allLayouts {
			if n >= l.Copies() {
				add(Geometry{Level: Level10, Members: n, Layout: l})
			}
		}
	}
	return gs
}

// TestLocateMatchesMD compares Locate, ArraySectors and DataStripeSectors
// with the transcription of md's code, for every sector (chunk 8) or the
// first, a middle and the last sector of every chunk (bigger chunks) of
// small arrays.
func TestLocateMatchesMD(t *testing.T) {
	gs := testGeometries([]uint64{8, 16, 128}, []uint64{1, 2, 3, 4, 5, 6, 7, 11},
		func(c uint64) []uint64 { return []uint64{0, 1, c - 1} })
	if len(gs) < 1000 {
		t.Fatalf("only %d geometries", len(gs))
	}
	var buf [MaxCopies]Location
	for _, g := range gs {
		size := g.ArraySectors()
		if want := mdArraySectors(g); size != want {
			t.Fatalf("%s: ArraySectors() = %d, md's size is %d", g.name(), size, want)
		}
		if got, want := g.DataStripeSectors(), mdIOOpt(g); got != want {
			t.Fatalf("%s: DataStripeSectors() = %d, md's io_opt is %d", g.name(), got, want)
		}
		check := func(s uint64) {
			got := g.Locate(s, buf[:])
			if want := mdLocate(g, s); !equalLocs(got, want) {
				t.Fatalf("%s: Locate(%d) = %v, md maps it to %v", g.name(), s, got, want)
			}
		}
		for s := uint64(0); s < size; s++ {
			if g.ChunkSectors > 8 && g.Level != Level1 {
				if k := s % g.ChunkSectors; k != 0 && k != g.ChunkSectors/2+1 && k != g.ChunkSectors-1 {
					continue
				}
			}
			check(s)
		}
	}
}

// TestLocateLarge compares with md at the ends of big members: the far
// layouts' stride and sector arithmetic at sizes of real disks.
func TestLocateLarge(t *testing.T) {
	var buf [MaxCopies]Location
	for _, ms := range []uint64{1 << 31, 3<<40 + 12345, MaxMemberSectors} {
		for _, g := range testGeometries([]uint64{8, 1024, MaxChunkSectors}, []uint64{0},
			func(uint64) []uint64 { return []uint64{ms} }) {
			size := g.ArraySectors()
			if want := mdArraySectors(g); size != want {
				t.Fatalf("%s: ArraySectors() = %d, md's size is %d", g.name(), size, want)
			}
			for _, s := range []uint64{0, 1, size / 3, size/2 + 7, size - g.ChunkSectors, size - 1} {
				got := g.Locate(s, buf[:])
				if want := mdLocate(g, s); !equalLocs(got, want) {
					t.Fatalf("%s: Locate(%d) = %v, md maps it to %v", g.name(), s, got, want)
				}
				for _, l := range got {
					if l.Sector >= g.MemberSectors {
						t.Fatalf("%s: Locate(%d) = %v: beyond the member", g.name(), s, got)
					}
				}
			}
		}
	}
}

// genGeometry draws a valid geometry with chunks of at most
// MinChunkSectors<<maxChunkShift and members of at most maxMemberChunks
// chunks (plus a partial chunk).
func genGeometry(t *rapid.T, maxChunkShift int, maxMemberChunks uint64) Geometry {
	g := Geometry{Level: rapid.SampledFrom([]Level{Level0, Level1, Level10}).Draw(t, "level")}
	switch g.Level {
	case Level0:
		g.Members = rapid.IntRange(2, 8).Draw(t, "members")
	case Level1:
		g.Members = rapid.IntRange(2, MaxCopies).Draw(t, "members")
	case Level10:
		g.Layout = rapid.SampledFrom(allLayouts).Draw(t, "layout")
		g.Members = rapid.IntRange(g.Layout.Copies(), 8).Draw(t, "members")
	}
	g.ChunkSectors = MinChunkSectors << rapid.IntRange(0, maxChunkShift).Draw(t, "chunkShift")
	minChunks := uint64(max(g.Layout.Far, 1))
	chunks := rapid.Uint64Range(minChunks, max(minChunks, maxMemberChunks)).Draw(t, "memberChunks")
	g.MemberSectors = chunks*g.ChunkSectors + rapid.Uint64Range(0, g.ChunkSectors-1).Draw(t, "extra")
	g.MemberSectors = min(g.MemberSectors, MaxMemberSectors)
	if err := g.Validate(); err != nil {
		t.Fatalf("%s: %v", g.name(), err)
	}
	return g
}

// TestLocateProperties checks, over whole small arrays: every sector has
// Copies() copies on distinct members, inside the members; no two (sector,
// copy) pairs share a member sector; ChunkEnd's runs are contiguous on every
// copy; the size is md's.
func TestLocateProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGeometry(t, 5, 24)
		size := g.ArraySectors()
		if want := mdArraySectors(g); size != want {
			t.Fatalf("%s: ArraySectors() = %d, md's size is %d", g.name(), size, want)
		}
		if size == 0 {
			t.Fatalf("%s: empty array", g.name())
		}
		if size*uint64(g.Copies()) > g.MemberSectors*uint64(g.Members) {
			t.Fatalf("%s: %d sectors x %d copies do not fit", g.name(), size, g.Copies())
		}
		used := make([]bool, uint64(g.Members)*g.MemberSectors)
		var buf, next [MaxCopies]Location
		for s := uint64(0); s < size; s++ {
			locs := g.Locate(s, buf[:])
			if len(locs) != g.Copies() {
				t.Fatalf("%s: Locate(%d) = %v: want %d copies", g.name(), s, locs, g.Copies())
			}
			var members uint64
			for _, l := range locs {
				if l.Member < 0 || l.Member >= g.Members || l.Sector >= g.MemberSectors {
					t.Fatalf("%s: Locate(%d) = %v: outside the members", g.name(), s, locs)
				}
				if members&(1<<l.Member) != 0 {
					t.Fatalf("%s: Locate(%d) = %v: two copies on member %d", g.name(), s, locs, l.Member)
				}
				members |= 1 << l.Member
				i := uint64(l.Member)*g.MemberSectors + l.Sector
				if used[i] {
					t.Fatalf("%s: Locate(%d) = %v: member %d sector %d already holds another sector", g.name(), s, locs, l.Member, l.Sector)
				}
				used[i] = true
			}
			// Within ChunkEnd, every copy continues on the same member.
			end := g.ChunkEnd(s)
			if end == 0 || s+end > size {
				t.Fatalf("%s: ChunkEnd(%d) = %d, array size %d", g.name(), s, end, size)
			}
			if g.Level != Level1 && (end > g.ChunkSectors || (s+end)%g.ChunkSectors != 0) {
				t.Fatalf("%s: ChunkEnd(%d) = %d is not the chunk's end", g.name(), s, end)
			}
			if end > 1 {
				nl := g.Locate(s+1, next[:])
				if g.ChunkEnd(s+1) != end-1 {
					t.Fatalf("%s: ChunkEnd(%d) = %d but ChunkEnd(%d) = %d", g.name(), s, end, s+1, g.ChunkEnd(s+1))
				}
				for i := range locs {
					if nl[i].Member != locs[i].Member || nl[i].Sector != locs[i].Sector+1 {
						t.Fatalf("%s: ChunkEnd(%d) = %d but copy %d of %d is at %v, of %d at %v", g.name(), s, end, i, s, locs[i], s+1, nl[i])
					}
				}
			}
		}
	})
}

// TestLocateLargeProperties checks random sectors of big geometries against
// md's mapping and the basic invariants.
func TestLocateLargeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genGeometry(t, 14, MaxMemberSectors/MaxChunkSectors)
		size := g.ArraySectors()
		if want := mdArraySectors(g); size != want {
			t.Fatalf("%s: ArraySectors() = %d, md's size is %d", g.name(), size, want)
		}
		var buf [MaxCopies]Location
		for range 20 {
			s := rapid.Uint64Range(0, size-1).Draw(t, "sector")
			got := g.Locate(s, buf[:])
			if want := mdLocate(g, s); !equalLocs(got, want) {
				t.Fatalf("%s: Locate(%d) = %v, md maps it to %v", g.name(), s, got, want)
			}
			var members uint64
			for _, l := range got {
				if l.Sector >= g.MemberSectors || members&(1<<l.Member) != 0 {
					t.Fatalf("%s: Locate(%d) = %v: beyond the member or two copies on one", g.name(), s, got)
				}
				members |= 1 << l.Member
			}
			end := g.ChunkEnd(s)
			last := g.Locate(s+end-1, make([]Location, 0, MaxCopies))
			for i := range got {
				if last[i].Member != got[i].Member || last[i].Sector != got[i].Sector+end-1 {
					t.Fatalf("%s: ChunkEnd(%d) = %d but copy %d of %d is at %v", g.name(), s, end, i, s+end-1, last[i])
				}
			}
		}
	})
}

func benchGeometries() []Geometry {
	const member = 1 << 31 // 1 TiB
	return []Geometry{
		{Level: Level0, Members: 4, ChunkSectors: 1024, MemberSectors: member},
		{Level: Level1, Members: 2, ChunkSectors: 1024, MemberSectors: member},
		{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 1024, MemberSectors: member},
		{Level: Level10, Members: 3, Layout: LayoutN3, ChunkSectors: 1024, MemberSectors: member},
		{Level: Level10, Members: 4, Layout: LayoutF2, ChunkSectors: 1024, MemberSectors: member},
		{Level: Level10, Members: 5, Layout: LayoutO3, ChunkSectors: 1024, MemberSectors: member},
		{Level: Level1, Members: MaxCopies, ChunkSectors: 1024, MemberSectors: member},
	}
}

func TestLocateDoesNotAllocate(t *testing.T) {
	for _, g := range benchGeometries() {
		var buf [MaxCopies]Location
		out := buf[:0]
		s := uint64(123456789)
		var n uint64
		allocs := testing.AllocsPerRun(200, func() {
			out = g.Locate(s, out)
			n += g.ChunkEnd(s)
			s += 4097
		})
		if allocs != 0 {
			t.Errorf("%s: Locate and ChunkEnd allocate %.1f times per call", g.name(), allocs)
		}
		if len(out) != g.Copies() || n == 0 {
			t.Errorf("%s: Locate returned %d copies", g.name(), len(out))
		}
	}
}

func BenchmarkLocate(b *testing.B) {
	for _, g := range benchGeometries() {
		b.Run(strings.ReplaceAll(g.name(), " ", "_"), func(b *testing.B) {
			var buf [MaxCopies]Location
			out := buf[:0]
			size := g.ArraySectors()
			s := uint64(0)
			for b.Loop() {
				out = g.Locate(s, out)
				s += 8
				if s >= size {
					s = 0
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Geometry{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 1024, MemberSectors: 1 << 21}
	if err := ok.Validate(); err != nil {
		t.Fatalf("%s: %v", ok.name(), err)
	}
	tests := []struct {
		name string
		edit func(*Geometry)
		want string
	}{
		{"level", func(g *Geometry) { g.Level = 5 }, "unsupported RAID level 5: want 0, 1 or 10"},
		{"raid0 one member", func(g *Geometry) { g.Level, g.Members, g.Layout = Level0, 1, Layout{} }, "raid0 needs 2 to 64 members, not 1"},
		{"raid0 too many", func(g *Geometry) { g.Level, g.Members, g.Layout = Level0, 65, Layout{} }, "raid0 needs 2 to 64 members, not 65"},
		{"raid1 one member", func(g *Geometry) { g.Level, g.Members, g.Layout = Level1, 1, Layout{} }, "raid1 needs 2 to 16 members, not 1"},
		{"raid1 too many", func(g *Geometry) { g.Level, g.Members, g.Layout = Level1, 17, Layout{} }, "raid1 needs 2 to 16 members, not 17"},
		{"raid0 layout", func(g *Geometry) { g.Level = Level0 }, "raid0 takes no layout (got n2)"},
		{"raid1 layout", func(g *Geometry) { g.Level, g.Layout = Level1, LayoutF2 }, "raid1 takes no layout (got f2)"},
		{"raid10 no layout", func(g *Geometry) { g.Layout = Layout{} }, "raid10 needs a layout: n2, n3, f2, f3, o2 or o3"},
		{"raid10 one copy", func(g *Geometry) { g.Layout = Layout{Near: 1, Far: 1} }, "invalid raid10 layout n1: the number of copies must be 2 or 3, not 1"},
		{"raid10 four copies", func(g *Geometry) { g.Layout = Layout{Near: 2, Far: 2} }, "invalid raid10 layout n2f2: the number of copies must be 2 or 3, not 4"},
		{"raid10 n4", func(g *Geometry) { g.Layout = Layout{Near: 4, Far: 1} }, "invalid raid10 layout (near 4, far 1): want n2, n3, f2, f3, o2 or o3"},
		{"raid10 near 0", func(g *Geometry) { g.Layout = Layout{Near: 0, Far: 2} }, "invalid raid10 layout (near 0, far 2)"},
		{"raid10 offset near", func(g *Geometry) { g.Layout = Layout{Near: 2, Far: 1, Offset: true} }, "invalid raid10 layout n2o1: offset needs 2 or 3 far copies"},
		{"raid10 n3 on 2", func(g *Geometry) { g.Members, g.Layout = 2, LayoutN3 }, "raid10 layout n3 needs at least 3 members, not 2"},
		{"raid10 f3 on 2", func(g *Geometry) { g.Members, g.Layout = 2, LayoutF3 }, "raid10 layout f3 needs at least 3 members, not 2"},
		{"raid10 one member", func(g *Geometry) { g.Members = 1 }, "raid10 layout n2 needs at least 2 members, not 1"},
		{"raid10 too many", func(g *Geometry) { g.Members = 65 }, "raid10 supports at most 64 members, not 65"},
		{"chunk zero", func(g *Geometry) { g.ChunkSectors = 0 }, "chunk size is not set"},
		{"chunk 12K", func(g *Geometry) { g.ChunkSectors = 24 }, "chunk size 12 KiB is not a power of two"},
		{"chunk odd", func(g *Geometry) { g.ChunkSectors = 7 }, "chunk size 7 sectors is not a power of two"},
		{"chunk small", func(g *Geometry) { g.ChunkSectors = 4 }, "chunk size 2 KiB is below the minimum of 4 KiB"},
		{"chunk 1 sector", func(g *Geometry) { g.ChunkSectors = 1 }, "chunk size 1 sector is below the minimum of 4 KiB"},
		{"chunk large", func(g *Geometry) { g.ChunkSectors = 1 << 18 }, "chunk size 128 MiB is above the maximum of 64 MiB"},
		{"raid1 chunk", func(g *Geometry) { g.Level, g.Layout, g.ChunkSectors = Level1, Layout{}, 100 }, "chunk size 50 KiB is not a power of two"},
		{"member empty", func(g *Geometry) { g.MemberSectors = 0 }, "member data size 0 bytes is too small: raid10 n2 with 512 KiB chunks needs at least 512 KiB per member"},
		{"member small raid0", func(g *Geometry) { g.Level, g.Layout, g.MemberSectors = Level0, Layout{}, 1023 }, "member data size 1023 sectors is too small: raid0 with 512 KiB chunks needs at least 512 KiB per member"},
		{"member small raid1", func(g *Geometry) { g.Level, g.Layout, g.MemberSectors = Level1, Layout{}, 1000 }, "member data size 500 KiB is too small: raid1 with 512 KiB chunks needs at least 512 KiB per member"},
		{"member small f3", func(g *Geometry) { g.Layout, g.MemberSectors = LayoutF3, 3*1024-2 }, "member data size 1535 KiB is too small: raid10 f3 with 512 KiB chunks needs at least 1536 KiB per member"},
		{"member small o2", func(g *Geometry) { g.Layout, g.MemberSectors = LayoutO2, 1024 }, "member data size 512 KiB is too small: raid10 o2 with 512 KiB chunks needs at least 1 MiB per member"},
		{"member huge", func(g *Geometry) { g.MemberSectors = MaxMemberSectors + 1 }, "member data size 281474976710657 sectors is above the maximum of 128 PiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := ok
			tt.edit(&g)
			err := g.Validate()
			if err == nil {
				t.Fatalf("%s: no error, want %q", g.name(), tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("%s:\n got %q\nwant %q", g.name(), err, tt.want)
			}
		})
	}
	// The smallest valid members.
	for _, g := range []Geometry{
		{Level: Level0, Members: 2, ChunkSectors: 8, MemberSectors: 8},
		{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 8},
		{Level: Level1, Members: MaxCopies, ChunkSectors: MaxChunkSectors, MemberSectors: MaxChunkSectors},
		{Level: Level10, Members: 2, Layout: LayoutN2, ChunkSectors: 8, MemberSectors: 8},
		{Level: Level10, Members: 3, Layout: LayoutF3, ChunkSectors: 8, MemberSectors: 24},
		{Level: Level10, Members: 2, Layout: LayoutO2, ChunkSectors: 8, MemberSectors: 16},
		{Level: Level0, Members: MaxMembers, ChunkSectors: MaxChunkSectors, MemberSectors: MaxMemberSectors},
	} {
		if err := g.Validate(); err != nil {
			t.Errorf("%s: %v", g.name(), err)
		}
		if g.ArraySectors() == 0 {
			t.Errorf("%s: empty array", g.name())
		}
	}
}

func TestLayoutNames(t *testing.T) {
	tests := []struct {
		name string
		l    Layout
		md   uint32
	}{
		{"n2", LayoutN2, 0x102},
		{"n3", LayoutN3, 0x103},
		{"f2", LayoutF2, 0x201},
		{"f3", LayoutF3, 0x301},
		{"o2", LayoutO2, 0x10201},
		{"o3", LayoutO3, 0x10301},
	}
	for _, tt := range tests {
		l, err := ParseLayout(tt.name)
		if err != nil || l != tt.l {
			t.Errorf("ParseLayout(%q) = %+v, %v; want %+v", tt.name, l, err, tt.l)
		}
		if s := tt.l.String(); s != tt.name {
			t.Errorf("%+v.String() = %q, want %q", tt.l, s, tt.name)
		}
		if v := tt.l.MD(); v != tt.md {
			t.Errorf("%s.MD() = %#x, want %#x", tt.name, v, tt.md)
		}
		l, err = LayoutFromMD(tt.md)
		if err != nil || l != tt.l {
			t.Errorf("LayoutFromMD(%#x) = %+v, %v; want %+v", tt.md, l, err, tt.l)
		}
		if l.Copies() != int(tt.name[1]-'0') {
			t.Errorf("%s.Copies() = %d", tt.name, l.Copies())
		}
	}
	if s := (Layout{}).String(); s != "" {
		t.Errorf("zero Layout String() = %q, want \"\"", s)
	}
	if s := Level10.String(); s != "raid10" {
		t.Errorf("Level10.String() = %q", s)
	}

	for _, tt := range []struct{ in, want string }{
		{"", `invalid raid10 layout "": want n2, n3, f2, f3, o2 or o3`},
		{"n", `invalid raid10 layout "n": want n2, n3, f2, f3, o2 or o3`},
		{"x2", `invalid raid10 layout "x2": want n2, n3, f2, f3, o2 or o3`},
		{"N2", `invalid raid10 layout "N2": want n2, n3, f2, f3, o2 or o3`},
		{"n2 ", `invalid raid10 layout "n2 ": want n2, n3, f2, f3, o2 or o3`},
		{"near2", `invalid raid10 layout "near2": want n2, n3, f2, f3, o2 or o3`},
		{"f22", `invalid raid10 layout "f22": want n2, n3, f2, f3, o2 or o3`},
		{"o-", `invalid raid10 layout "o-": want n2, n3, f2, f3, o2 or o3`},
		{"n1", `invalid raid10 layout "n1": the number of copies must be 2 or 3`},
		{"f4", `invalid raid10 layout "f4": the number of copies must be 2 or 3`},
		{"o0", `invalid raid10 layout "o0": the number of copies must be 2 or 3`},
	} {
		l, err := ParseLayout(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseLayout(%q) = %+v, %v; want error %q", tt.in, l, err, tt.want)
		}
	}

	for _, tt := range []struct {
		v    uint32
		want string
	}{
		{0, "unsupported md raid10 layout 0x0: raid10 needs a layout"},
		{0x101, "unsupported md raid10 layout 0x101: invalid raid10 layout n1: the number of copies must be 2 or 3, not 1"},
		{0x202, "unsupported md raid10 layout 0x202: invalid raid10 layout n2f2: the number of copies must be 2 or 3, not 4"},
		{0x104, "unsupported md raid10 layout 0x104: invalid raid10 layout (near 4, far 1)"},
		{0x10102, "unsupported md raid10 layout 0x10102: invalid raid10 layout n2o1: offset needs 2 or 3 far copies"},
		{0x20201, "unsupported md raid10 layout 0x20201: only layout version 0 is supported (far sets are not)"},
		{0x40201, "unsupported md raid10 layout 0x40201: only layout version 0 is supported (far sets are not)"},
	} {
		l, err := LayoutFromMD(tt.v)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("LayoutFromMD(%#x) = %+v, %v; want error %q", tt.v, l, err, tt.want)
		}
	}

	// Every byte pattern LayoutFromMD accepts round-trips, and only the six.
	accepted := 0
	for v := uint32(0); v < 1<<17; v++ {
		l, err := LayoutFromMD(v)
		if err != nil {
			continue
		}
		accepted++
		if l.MD() != v {
			t.Errorf("LayoutFromMD(%#x).MD() = %#x", v, l.MD())
		}
		if p, err := ParseLayout(l.String()); err != nil || p != l {
			t.Errorf("ParseLayout(%q) = %+v, %v; want %+v", l.String(), p, err, l)
		}
	}
	if accepted != len(tests) {
		t.Errorf("LayoutFromMD accepts %d values, want %d", accepted, len(tests))
	}
}

func TestDataStripeSectors(t *testing.T) {
	for _, tt := range []struct {
		g    Geometry
		want uint64
	}{
		{Geometry{Level: Level0, Members: 3, ChunkSectors: 128}, 384},
		{Geometry{Level: Level1, Members: 2, ChunkSectors: 128}, 0},
		{Geometry{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 128}, 256},
		{Geometry{Level: Level10, Members: 3, Layout: LayoutN2, ChunkSectors: 128}, 384},
		{Geometry{Level: Level10, Members: 6, Layout: LayoutN3, ChunkSectors: 128}, 256},
		{Geometry{Level: Level10, Members: 4, Layout: LayoutF2, ChunkSectors: 128}, 512},
		{Geometry{Level: Level10, Members: 2, Layout: LayoutO2, ChunkSectors: 128}, 256},
	} {
		if got := tt.g.DataStripeSectors(); got != tt.want {
			t.Errorf("%s: DataStripeSectors() = %d, want %d", tt.g.name(), got, tt.want)
		}
	}
}

func TestChunkEndRAID1(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 100}
	for _, tt := range []struct{ s, want uint64 }{{0, 100}, {37, 63}, {99, 1}, {100, 0}, {200, 0}} {
		if got := g.ChunkEnd(tt.s); got != tt.want {
			t.Errorf("ChunkEnd(%d) = %d, want %d", tt.s, got, tt.want)
		}
	}
}
