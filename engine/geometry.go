package engine

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// Level is a RAID level.
type Level int

// The supported RAID levels.
const (
	Level0  Level = 0  // striping, no redundancy
	Level1  Level = 1  // mirroring: every member holds the whole array
	Level10 Level = 10 // md's raid10: striped copies, see Layout
)

// String returns the level as md and mdadm name it: "raid0", "raid1",
// "raid10".
func (l Level) String() string {
	return "raid" + strconv.Itoa(int(l))
}

// Limits of a Geometry, checked by Validate.
const (
	// MinChunkSectors is the smallest chunk: 4 KiB, md's minimum (one page).
	MinChunkSectors = 8
	// MaxChunkSectors is the largest chunk: 64 MiB.
	MaxChunkSectors = 131072
	// MaxMembers is the largest number of members of any array.
	MaxMembers = 64
	// MaxCopies is the largest number of copies of one sector (raid1 with
	// the most members); a [MaxCopies]Location array is always big enough
	// for Locate.
	MaxCopies = 16
	// MaxMemberSectors is the largest usable member size: 2^48 sectors
	// (128 PiB), which keeps all of the mapping's arithmetic far from
	// overflow.
	MaxMemberSectors = 1 << 48
)

// Layout is raid10's copy arrangement, as mdadm names it: nK (near: the K
// copies of a chunk sit side by side on consecutive members), fK (far: each
// member is split into K sections, each section of the array holding a whole
// raid0-like copy of the data, rotated by one member from the previous one)
// and oK (offset: like far, but each stripe row is followed by its K-1
// rotated copies). K, the number of copies, is 2 or 3.
//
// Near and Far are md's near_copies and far_copies; Offset is md's
// far_offset flag. The zero Layout means "no layout" (raid0, raid1).
type Layout struct {
	Near, Far int
	Offset    bool
}

// The six raid10 layouts mdadm creates (2 or 3 copies).
var (
	LayoutN2 = Layout{Near: 2, Far: 1}
	LayoutN3 = Layout{Near: 3, Far: 1}
	LayoutF2 = Layout{Near: 1, Far: 2}
	LayoutF3 = Layout{Near: 1, Far: 3}
	LayoutO2 = Layout{Near: 1, Far: 2, Offset: true}
	LayoutO3 = Layout{Near: 1, Far: 3, Offset: true}
)

const layoutNames = "n2, n3, f2, f3, o2 or o3"

// ParseLayout parses a raid10 layout as mdadm writes it: "n2", "n3", "f2",
// "f3", "o2" or "o3".
func ParseLayout(s string) (Layout, error) {
	if len(s) != 2 || s[1] < '0' || s[1] > '9' {
		return Layout{}, fmt.Errorf("invalid raid10 layout %q: want %s", s, layoutNames)
	}
	copies := int(s[1] - '0')
	var l Layout
	switch s[0] {
	case 'n':
		l = Layout{Near: copies, Far: 1}
	case 'f':
		l = Layout{Near: 1, Far: copies}
	case 'o':
		l = Layout{Near: 1, Far: copies, Offset: true}
	default:
		return Layout{}, fmt.Errorf("invalid raid10 layout %q: want %s", s, layoutNames)
	}
	if copies < 2 || copies > 3 {
		return Layout{}, fmt.Errorf("invalid raid10 layout %q: the number of copies must be 2 or 3", s)
	}
	return l, nil
}

// String returns the layout as mdadm names it ("n2", "f3", "o2", ...), ""
// for the zero Layout, and a combined form such as "n2f2" for layouts mdadm
// cannot create.
func (l Layout) String() string {
	switch {
	case l == Layout{}:
		return ""
	case l.Far == 1 && !l.Offset:
		return "n" + strconv.Itoa(l.Near)
	case l.Near == 1 && l.Offset:
		return "o" + strconv.Itoa(l.Far)
	case l.Near == 1:
		return "f" + strconv.Itoa(l.Far)
	case l.Offset:
		return "n" + strconv.Itoa(l.Near) + "o" + strconv.Itoa(l.Far)
	default:
		return "n" + strconv.Itoa(l.Near) + "f" + strconv.Itoa(l.Far)
	}
}

// Copies returns the number of copies of each sector: Near*Far.
func (l Layout) Copies() int { return l.Near * l.Far }

// check reports whether the layout is one this package maps: copies 2 or 3,
// and the offset flag only with far copies.
func (l Layout) check() error {
	if l == (Layout{}) {
		return fmt.Errorf("raid10 needs a layout: %s", layoutNames)
	}
	if l.Near < 1 || l.Far < 1 || l.Near > 3 || l.Far > 3 {
		return fmt.Errorf("invalid raid10 layout (near %d, far %d): want %s", l.Near, l.Far, layoutNames)
	}
	if c := l.Copies(); c < 2 || c > 3 {
		return fmt.Errorf("invalid raid10 layout %s: the number of copies must be 2 or 3, not %d", l, c)
	}
	if l.Offset && l.Far < 2 {
		return fmt.Errorf("invalid raid10 layout %s: offset needs 2 or 3 far copies", l)
	}
	return nil
}

// MD returns md's layout number for the layout (the superblock's layout
// field, mdadm's --layout in numbers): near | far<<8 | offset<<16, layout
// version 0 (bits 17 and 18 clear: the far copies rotate over all members).
func (l Layout) MD() uint32 {
	v := uint32(l.Near)&0xff | (uint32(l.Far)&0xff)<<8
	if l.Offset {
		v |= 1 << 16
	}
	return v
}

// LayoutFromMD decodes md's raid10 layout number (see Layout.MD). It rejects
// layouts this package does not map: other copy counts than 2 and 3, and md's
// "far sets" layout versions 1 and 2 (which mdadm does not create).
func LayoutFromMD(v uint32) (Layout, error) {
	if v>>17 != 0 {
		return Layout{}, fmt.Errorf("unsupported md raid10 layout %#x: only layout version 0 is supported (far sets are not)", v)
	}
	l := Layout{Near: int(v & 0xff), Far: int((v >> 8) & 0xff), Offset: v&(1<<16) != 0}
	if err := l.check(); err != nil {
		return Layout{}, fmt.Errorf("unsupported md raid10 layout %#x: %w", v, err)
	}
	return l, nil
}

// Geometry is the shape of an array: how array sectors map onto member
// sectors. It matches md's mapping for the same level, member count, layout
// and chunk size (md's raid0 with equal-size members, raid1, and raid10 with
// layout version 0), so members of an md array can be served as they are,
// given each member's data offset.
type Geometry struct {
	Level   Level
	Members int    // number of members: md's raid_disks
	Layout  Layout // raid10 only; the zero Layout for raid0 and raid1
	// ChunkSectors is the chunk size in 512-byte sectors: a power of two
	// from MinChunkSectors to MaxChunkSectors. raid1 does not use it for
	// the mapping but it must still be valid.
	ChunkSectors uint64
	// MemberSectors is the number of usable data sectors on each member,
	// starting at the member's data offset (md's component size). Sectors
	// past the last whole chunk (raid0, raid10), or past what a raid10 far
	// layout can use, are left unused, as md leaves them.
	MemberSectors uint64
}

// Validate checks that the geometry is one this package maps: a supported
// level, a member count the level allows, a raid10 layout with 2 or 3 copies
// and at least as many members as copies, a valid chunk size, and members
// big enough to hold at least one chunk of every copy.
func (g Geometry) Validate() error {
	switch g.Level {
	case Level0:
		if g.Members < 2 || g.Members > MaxMembers {
			return fmt.Errorf("raid0 needs 2 to %d members, not %d", MaxMembers, g.Members)
		}
	case Level1:
		if g.Members < 2 || g.Members > MaxCopies {
			return fmt.Errorf("raid1 needs 2 to %d members, not %d", MaxCopies, g.Members)
		}
	case Level10:
		if err := g.Layout.check(); err != nil {
			return err
		}
		if c := g.Layout.Copies(); g.Members < c {
			return fmt.Errorf("raid10 layout %s needs at least %d members, not %d", g.Layout, c, g.Members)
		}
		if g.Members > MaxMembers {
			return fmt.Errorf("raid10 supports at most %d members, not %d", MaxMembers, g.Members)
		}
	default:
		return fmt.Errorf("unsupported RAID level %d: want 0, 1 or 10", int(g.Level))
	}
	if g.Level != Level10 && g.Layout != (Layout{}) {
		return fmt.Errorf("%s takes no layout (got %s)", g.Level, g.Layout)
	}
	if err := checkChunkAndSize(g.ChunkSectors, g.MemberSectors); err != nil {
		return err
	}
	// Every member must hold at least one chunk of each far section (one
	// chunk for raid0, raid1 and raid10 near).
	need := g.ChunkSectors
	what := g.Level.String()
	if g.Level == Level10 {
		need *= uint64(g.Layout.Far)
		what += " " + g.Layout.String()
	}
	if g.MemberSectors < need {
		return fmt.Errorf("member data size %s is too small: %s with %s chunks needs at least %s per member",
			sectorsString(g.MemberSectors), what, sectorsString(g.ChunkSectors), sectorsString(need))
	}
	return nil
}

// checkChunkAndSize checks a chunk size (a power of two from
// MinChunkSectors to MaxChunkSectors) and a member data size (at most
// MaxMemberSectors), for every level.
func checkChunkAndSize(chunk, member uint64) error {
	switch c := chunk; {
	case c == 0:
		return errors.New("chunk size is not set")
	case c&(c-1) != 0:
		return fmt.Errorf("chunk size %s is not a power of two", sectorsString(c))
	case c < MinChunkSectors:
		return fmt.Errorf("chunk size %s is below the minimum of %s", sectorsString(c), sectorsString(MinChunkSectors))
	case c > MaxChunkSectors:
		return fmt.Errorf("chunk size %s is above the maximum of %s", sectorsString(c), sectorsString(MaxChunkSectors))
	}
	if member > MaxMemberSectors {
		return fmt.Errorf("member data size %s is above the maximum of %s", sectorsString(member), sectorsString(MaxMemberSectors))
	}
	return nil
}

// sectorsString formats a number of 512-byte sectors for messages: "12 KiB",
// "64 MiB", or "7 sectors" when it is not a whole number of KiB.
func sectorsString(n uint64) string {
	if n == 0 {
		return "0 bytes"
	}
	if n%2 != 0 {
		if n == 1 {
			return "1 sector"
		}
		return strconv.FormatUint(n, 10) + " sectors"
	}
	v := n / 2
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		if v%1024 != 0 || unit == "PiB" {
			return strconv.FormatUint(v, 10) + " " + unit
		}
		v /= 1024
	}
	panic("unreachable")
}

// MaxRequestOps is the most member operations one request's plan may
// have: an operation's ID tells its index in 16 bits (opID).
const MaxRequestOps = 1 << 16

// MaxPlanSectors is the largest request (DISCARD or WRITE_ZEROES: reads
// and writes are bounded by the queue's buffers far below) whose plan
// stays within MaxRequestOps: one operation per chunk piece and copy, a
// request covering at most sectors/chunk + 2 pieces, and room left for a
// flush of each member after them (a WRITE_ZEROES with FUA). Unbounded
// for raid1 (one operation per copy).
func (g Geometry) MaxPlanSectors() uint64 {
	if g.Level == Level1 {
		return math.MaxUint64
	}
	return uint64((MaxRequestOps-g.Members)/g.Copies()-2) * g.ChunkSectors
}

// Copies returns how many copies of each array sector there are: 1 for
// raid0, Members for raid1, Near*Far for raid10.
func (g Geometry) Copies() int {
	switch g.Level {
	case Level1:
		return g.Members
	case Level10:
		return g.Layout.Copies()
	default:
		return 1
	}
}

func (g Geometry) chunkShift() uint { return uint(bits.TrailingZeros64(g.ChunkSectors)) }

// ArraySectors returns the size of the array in sectors, by md's formulas:
// raid0 (equal-size members): MemberSectors rounded down to a whole chunk,
// times Members; raid1: MemberSectors; raid10 (md's raid10_size): the whole
// chunks of a member, divided by Far (integer division), times Members,
// divided by Near, in sectors.
func (g Geometry) ArraySectors() uint64 {
	switch g.Level {
	case Level0:
		return (g.MemberSectors &^ (g.ChunkSectors - 1)) * uint64(g.Members)
	case Level1:
		return g.MemberSectors
	case Level10:
		shift := g.chunkShift()
		chunks := (g.MemberSectors >> shift) / uint64(g.Layout.Far)
		return (chunks * uint64(g.Members) / uint64(g.Layout.Near)) << shift
	}
	return 0
}

// stride returns the distance in sectors on a member between consecutive
// far copies (md's geo.stride, as calc_sectors sets it): one chunk for the
// offset layouts, the far section size for the far layouts. calc_sectors
// derives the section size from the array size:
//
//	chunks = MemberChunks/Far*Members/Near
//	stride = ceil(chunks*Near*Far/Members) / Far
//
// which is MemberChunks/Far when Near is 1, as it is in every valid layout
// with far copies (copies are at most 3).
func (g Geometry) stride() uint64 {
	if g.Layout.Offset {
		return g.ChunkSectors
	}
	shift := g.chunkShift()
	return ((g.MemberSectors >> shift) / uint64(g.Layout.Far)) << shift
}

// Location is one copy of an array sector: a member (0-based, md's raid
// slot) and a sector on it, relative to the member's data offset.
type Location struct {
	Member int
	Sector uint64
}

// Locate appends the location of every copy of array sector s to out[:0]
// and returns the result; s must be below ArraySectors, and the geometry
// valid. It does not allocate when cap(out) >= Copies() (a [MaxCopies]
// array always is enough).
//
// The copies come in md's slot order: raid1 by member; raid10 as md's
// __raid10_find_phys fills r10bio->devs[]: for each near copy, that copy and
// then its far copies.
func (g Geometry) Locate(s uint64, out []Location) []Location {
	out = out[:0]
	switch g.Level {
	case Level0:
		shift := g.chunkShift()
		n := uint64(g.Members)
		chunk := s >> shift
		stripe := chunk / n
		dev := chunk - stripe*n
		out = append(out, Location{Member: int(dev), Sector: stripe<<shift | s&(g.ChunkSectors-1)})
	case Level1:
		for m := range g.Members {
			out = append(out, Location{Member: m, Sector: s})
		}
	case Level10:
		shift := g.chunkShift()
		n := uint64(g.Members)
		near := uint64(g.Layout.Near)
		far := g.Layout.Far
		chunk := (s >> shift) * near
		stripe := chunk / n
		dev := chunk - stripe*n
		if g.Layout.Offset {
			stripe *= uint64(far)
		}
		sector := stripe<<shift | s&(g.ChunkSectors-1)
		var stride uint64
		if far > 1 {
			stride = g.stride()
		}
		for range g.Layout.Near {
			d, ds := dev, sector
			out = append(out, Location{Member: int(d), Sector: ds})
			for f := 1; f < far; f++ {
				// far_set_size == raid_disks (layout version 0): each
				// far section is shifted by Near members, wrapping.
				if d += near; d >= n {
					d -= n
				}
				ds += stride
				out = append(out, Location{Member: int(d), Sector: ds})
			}
			dev++
			if dev >= n {
				dev = 0
				sector += g.ChunkSectors
			}
		}
	}
	return out
}

// EveryChunk calls f with the copies of each chunk in one repetition of
// the layout's pattern of members (within Members*Copies chunks; raid1:
// its one chunk, the whole array) and reports whether f returned true
// for every one (it stops at the first false). It is how coverage is
// judged: whether every chunk has a copy on members of some kind.
func (g Geometry) EveryChunk(f func(copies []Location) bool) bool {
	var locs [MaxCopies]Location
	step := g.ChunkSectors
	if g.Level == Level1 {
		step = g.ArraySectors()
	}
	limit := min(g.ArraySectors(), step*uint64(g.Members*g.Copies()+g.Members))
	for s := uint64(0); s < limit; s += step {
		if !f(g.Locate(s, locs[:0])) {
			return false
		}
	}
	return true
}

// ChunkEnd returns the number of sectors from s to the end of s's chunk:
// every copy of the sectors in [s, s+ChunkEnd(s)) is contiguous on its
// member, so one member request per copy serves them. For raid1 (no chunks)
// it returns the rest of the array, ArraySectors()-s (0 past the end).
func (g Geometry) ChunkEnd(s uint64) uint64 {
	if g.Level == Level1 {
		if s >= g.MemberSectors {
			return 0
		}
		return g.MemberSectors - s
	}
	return g.ChunkSectors - s&(g.ChunkSectors-1)
}

// DataStripeSectors returns the optimal I/O size in sectors (io_opt): the
// smallest run of whole chunks of array data, starting at sector 0, after
// which every member has received the same amount of data. It is what md
// reports as optimal_io_size:
//
//   - raid0: ChunkSectors * Members;
//   - raid10: ChunkSectors * Members/Near when Near divides Members, else
//     ChunkSectors * Members (the near copies then take Near rows to line up
//     again); the far and offset copies do not change it;
//   - raid1: 0, none (md's raid1 sets none of its own either).
func (g Geometry) DataStripeSectors() uint64 {
	n := uint64(g.Members)
	switch g.Level {
	case Level0:
		return g.ChunkSectors * n
	case Level10:
		if near := uint64(g.Layout.Near); n%near == 0 {
			return g.ChunkSectors * (n / near)
		}
		return g.ChunkSectors * n
	}
	return 0
}
