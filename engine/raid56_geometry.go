package engine

import (
	"fmt"
	"strings"
)

// The parity levels. Their mapping is ParityGeometry's; Geometry (levels 0,
// 1 and 10) refuses them.
const (
	Level5 Level = 5 // striping with one parity chunk (P) per stripe
	Level6 Level = 6 // striping with two (P and Q) per stripe
)

// ParityLayout is md's raid5/raid6 algorithm: where each stripe's parity
// sits and in which order the data chunks follow it. The values are md's
// layout numbers (ALGORITHM_*), as the superblock stores them.
//
//   - left-asymmetric: P starts on the last member and moves left one member
//     per stripe; data fills the other members from the first.
//   - right-asymmetric: P starts on the first member and moves right.
//   - left-symmetric (md's default): P as left-asymmetric; data starts on the
//     member after P (after Q for raid6) and wraps around.
//   - right-symmetric: P as right-asymmetric, data as left-symmetric.
//
// For raid6, Q follows P (in the asymmetric layouts, when P is on the last
// member Q is on the first and the data start after it).
type ParityLayout uint8

// md's four rotating layouts, shared by raid5 and raid6.
const (
	LeftAsymmetric  ParityLayout = 0
	RightAsymmetric ParityLayout = 1
	LeftSymmetric   ParityLayout = 2
	RightSymmetric  ParityLayout = 3
)

var parityLayoutNames = [...]string{"left-asymmetric", "right-asymmetric", "left-symmetric", "right-symmetric"}

// String returns the layout as mdadm names it.
func (l ParityLayout) String() string {
	if int(l) < len(parityLayoutNames) {
		return parityLayoutNames[l]
	}
	return fmt.Sprintf("layout %d", int(l))
}

// ParseParityLayout parses a raid5/6 layout as mdadm writes it, long
// ("left-symmetric") or short ("ls", "la", "rs", "ra").
func ParseParityLayout(s string) (ParityLayout, error) {
	for i, n := range parityLayoutNames {
		short := n[:1] + n[strings.IndexByte(n, '-')+1:][:1] // "ls", "ra", ...
		if s == n || s == short {
			return ParityLayout(i), nil
		}
	}
	return 0, fmt.Errorf("invalid raid5/6 layout %q: want left-symmetric (ls), right-symmetric (rs), left-asymmetric (la) or right-asymmetric (ra)", s)
}

// ParityGeometry is the shape of a raid5 or raid6 array: md's mapping of
// array sectors to data chunks, and of each stripe's chunks (data, P, Q)
// to members, for the same level, member count, layout and chunk size.
type ParityGeometry struct {
	Level        Level // Level5 or Level6
	Members      int   // md's raid_disks
	Layout       ParityLayout
	ChunkSectors uint64 // as Geometry's
	// MemberSectors is the usable data size of each member (md's component
	// size); a partial last chunk is left unused.
	MemberSectors uint64
}

// Validate checks that this package maps the geometry: level 5 with 3 to
// MaxMembers members or 6 with 4 to MaxMembers (mdadm's minimums for a
// non-degenerate array), one of the four layouts, a chunk size as for
// raid0 and at least one chunk per member.
func (g ParityGeometry) Validate() error {
	min := 3
	switch g.Level {
	case Level5:
	case Level6:
		min = 4
	default:
		return fmt.Errorf("not a parity level: %s", g.Level)
	}
	if g.Members < min || g.Members > MaxMembers {
		return fmt.Errorf("%s needs %d to %d members, not %d", g.Level, min, MaxMembers, g.Members)
	}
	if int(g.Layout) >= len(parityLayoutNames) {
		return fmt.Errorf("%s: unsupported layout %d", g.Level, int(g.Layout))
	}
	if err := checkChunkAndSize(g.ChunkSectors, g.MemberSectors); err != nil {
		return err
	}
	if g.MemberSectors < g.ChunkSectors {
		return fmt.Errorf("member data size %s is too small: %s with %s chunks needs at least one chunk per member",
			sectorsString(g.MemberSectors), g.Level, sectorsString(g.ChunkSectors))
	}
	return nil
}

// ParityMembers is the number of parity chunks per stripe: 1 or 2.
func (g ParityGeometry) ParityMembers() int {
	if g.Level == Level6 {
		return 2
	}
	return 1
}

// DataMembers is the number of data chunks per stripe.
func (g ParityGeometry) DataMembers() int { return g.Members - g.ParityMembers() }

// Stripes is the number of whole stripes (a chunk on every member).
func (g ParityGeometry) Stripes() uint64 { return g.MemberSectors / g.ChunkSectors }

// ArraySectors is the array's size: every whole stripe's data chunks.
func (g ParityGeometry) ArraySectors() uint64 {
	return g.Stripes() * g.ChunkSectors * uint64(g.DataMembers())
}

// StripeMap is where one stripe's chunks are: Data[i] is the member of the
// stripe's i-th data chunk in array order, P and Q the parity members (Q
// is -1 for raid5), Slot[m] the position of member m's data chunk in md's
// syndrome order (the power of the generator that multiplies it in Q; -1
// for P and Q). Every stripe's chunks sit at the same member offset,
// stripe × chunk.
type StripeMap struct {
	P, Q int
	Data [MaxMembers]int8
	Slot [MaxMembers]int8
}

// Stripe maps stripe s as md's raid5_compute_sector does.
func (g ParityGeometry) Stripe(s uint64) StripeMap {
	n := g.Members
	r := int(s % uint64(n))
	m := StripeMap{Q: -1}
	nd := g.DataMembers()
	if g.Level == Level5 {
		switch g.Layout {
		case LeftAsymmetric, LeftSymmetric:
			m.P = nd - r
		default:
			m.P = r
		}
		for d := range nd {
			switch g.Layout {
			case LeftAsymmetric, RightAsymmetric:
				mem := d
				if mem >= m.P {
					mem++
				}
				m.Data[d] = int8(mem)
			default:
				m.Data[d] = int8((m.P + 1 + d) % n)
			}
		}
	} else {
		switch g.Layout {
		case LeftAsymmetric, LeftSymmetric:
			m.P = n - 1 - r
		default:
			m.P = r
		}
		switch g.Layout {
		case LeftAsymmetric, RightAsymmetric:
			m.Q = m.P + 1
			if m.P == n-1 {
				m.Q = 0
			}
			for d := range nd {
				mem := d
				if m.P == n-1 {
					mem++ // Q D D D P
				} else if mem >= m.P {
					mem += 2 // D D P Q D
				}
				m.Data[d] = int8(mem)
			}
		default:
			m.Q = (m.P + 1) % n
			for d := range nd {
				m.Data[d] = int8((m.P + 2 + d) % n)
			}
		}
	}
	// Syndrome order: members from the one after Q (after P for raid5)
	// round to it, P and Q skipped.
	for i := range n {
		m.Slot[i] = -1
	}
	last := m.P
	if m.Q >= 0 {
		last = m.Q
	}
	slot := int8(0)
	for i := 1; i < n; i++ {
		mem := (last + i) % n
		if mem == m.P || mem == m.Q {
			continue
		}
		m.Slot[mem] = slot
		slot++
	}
	return m
}

// LocateData maps array sector s to its stripe, the index of its data
// chunk in the stripe, the member holding it and the member sector.
func (g ParityGeometry) LocateData(s uint64) (stripe uint64, dataIdx, member int, memberSector uint64) {
	chunk, off := s/g.ChunkSectors, s%g.ChunkSectors
	nd := uint64(g.DataMembers())
	stripe, dataIdx = chunk/nd, int(chunk%nd)
	member = int(g.Stripe(stripe).Data[dataIdx])
	return stripe, dataIdx, member, stripe*g.ChunkSectors + off
}
