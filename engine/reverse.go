package engine

// ArraySectorOf is the inverse of Locate: it returns the array sector whose
// copy member `member` holds at data sector `sector` (relative to the
// member's data offset). ok is false when that member sector holds no array
// data: past MemberSectors, in the partial chunk at the end of a raid0 or
// raid10 member, past the last far section of a raid10 far layout, or in the
// unused positions of the last raid10 near row (when Near does not divide
// the member count times the member's chunks).
//
// For every array sector s and every Location l in Locate(s),
// ArraySectorOf(l.Member, l.Sector) returns (s, true). Within one member
// chunk the mapping is contiguous: consecutive member sectors of a chunk map
// to consecutive array sectors, up to ChunkEnd of the first one.
//
// The geometry must be valid (see Validate); member must be in
// [0, Members). It does not allocate.
func (g Geometry) ArraySectorOf(member int, sector uint64) (arraySector uint64, ok bool) {
	if member < 0 || member >= g.Members || sector >= g.MemberSectors {
		return 0, false
	}
	switch g.Level {
	case Level1:
		return sector, true
	case Level0:
		shift := g.chunkShift()
		row := sector >> shift
		if row >= g.MemberSectors>>shift {
			return 0, false // the partial chunk at the end of the member
		}
		chunk := row*uint64(g.Members) + uint64(member)
		return chunk<<shift | sector&(g.ChunkSectors-1), true
	case Level10:
		return g.raid10ArraySectorOf(member, sector)
	}
	return 0, false
}

// raid10ArraySectorOf inverts raid10's Locate. Valid layouts have Near == 1
// or Far == 1 (at most 3 copies), which is what this relies on: with Far > 1
// a member chunk row is one far copy (f) of a base row, shifted by f*Near
// members; with Far == 1 the row is the near positions row*Members+member.
func (g Geometry) raid10ArraySectorOf(member int, sector uint64) (uint64, bool) {
	shift := g.chunkShift()
	n := uint64(g.Members)
	near := uint64(g.Layout.Near)
	far := uint64(g.Layout.Far)
	row := sector >> shift
	memberChunks := g.MemberSectors >> shift
	if row >= memberChunks {
		return 0, false
	}
	var f, base uint64 // far copy index, row of the first (f = 0) copy
	switch {
	case far == 1:
		base = row
	case g.Layout.Offset:
		f, base = row%far, row/far
	default:
		section := g.stride() >> shift // chunks per far section
		f, base = row/section, row%section
		if f >= far {
			return 0, false // past the last far section
		}
	}
	// Far copy f sits f*Near members after the first copy (mod Members).
	dev := (uint64(member) + n - (f*near)%n) % n
	pos := base*n + dev // md's "chunk * near_copies" position
	chunk := pos / near
	if chunk >= g.ArraySectors()>>shift {
		return 0, false // unused positions in the last near row
	}
	return chunk<<shift | sector&(g.ChunkSectors-1), true
}
