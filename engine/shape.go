package engine

// The shape of an array whatever its level: management (status, fail,
// remove, replace, spares, the syncer) asks these rather than Geo, which
// is the zero Geometry for a raid5/6 array (Parity is its geometry).

// Level is the array's RAID level.
func (a *Array) Level() Level {
	if a.Parity != nil {
		return a.Parity.Level
	}
	return a.Geo.Level
}

// MemberCount is the number of member roles (md's raid_disks).
func (a *Array) MemberCount() int {
	if a.Parity != nil {
		return a.Parity.Members
	}
	return a.Geo.Members
}

// MemberSectors is the data area each member's role uses, in sectors.
func (a *Array) MemberSectors() uint64 {
	if a.Parity != nil {
		return a.Parity.MemberSectors
	}
	return a.Geo.MemberSectors
}

// ArraySectors is the array's size in sectors.
func (a *Array) ArraySectors() uint64 {
	if a.Parity != nil {
		return a.Parity.ArraySectors()
	}
	return a.Geo.ArraySectors()
}

// ChunkSectors is the chunk size (0 for raid1).
func (a *Array) ChunkSectors() uint64 {
	if a.Parity != nil {
		return a.Parity.ChunkSectors
	}
	return a.Geo.ChunkSectors
}
