package engine

import "fmt"

// The superblock and assembly rules of the parity levels (raid5, raid6).
// A raid5/6 superblock stores md's layout number (ParityLayout: 0 to 3,
// the four rotating layouts md shares between raid5 and raid6) and a
// chunk size as raid0's (a power of two, never 0). md's other layouts
// (raid6's ALGORITHM_ROTATING_*_RESTART and the *_6 layouts converted from
// raid5, PARITY_0 and PARITY_N) are not supported and are refused.

// IsParityLevel reports whether l is raid5 or raid6.
func IsParityLevel(l Level) bool { return l == Level5 || l == Level6 }

// parityMembersOf is the number of parity chunks per stripe of level l
// (1 for raid5, 2 for raid6), or 0 if l is not a parity level.
func parityMembersOf(l Level) int {
	switch l {
	case Level5:
		return 1
	case Level6:
		return 2
	}
	return 0
}

// validateParityFields checks the level-specific fields of a raid5/6
// superblock: a layout this package maps and at least 3 (raid5) or 4
// (raid6) members. The chunk size is the common rule's (never 0: only
// raid1 may have none).
func validateParityFields(level, layout, members uint32) error {
	l := Level(level)
	if layout >= uint32(len(parityLayoutNames)) {
		return fmt.Errorf("RAID %d layout %#x is not one of md's four rotating layouts (0 to 3)", level, layout)
	}
	if min := uint32(2 + parityMembersOf(l)); members < min {
		return fmt.Errorf("RAID %d with %d members: it needs at least %d", level, members, min)
	}
	return nil
}

// ParityGeometryOf is the raid5/6 geometry a valid superblock of a parity
// level describes, with memberSectors as the data size of each member.
func ParityGeometryOf(sb *Superblock, memberSectors uint64) ParityGeometry {
	return ParityGeometry{Level: Level(sb.Level), Members: int(sb.Members), Layout: ParityLayout(sb.Layout),
		ChunkSectors: uint64(sb.ChunkSectors), MemberSectors: memberSectors}
}

// parityFailed reports whether a parity array with active of members
// roles active certainly cannot serve data: more roles are out of sync
// than its parity covers (a rebuilding role counts as out of sync, as md's
// degraded count does).
func parityFailed(level Level, members, active int) bool {
	return members-active > parityMembersOf(level)
}

// checkDirtyDegraded refuses, unless forced, a parity array that was not
// stopped cleanly and is degraded (a role not active): as md refuses to
// start a dirty degraded raid4/5/6. A crash may have left a stripe's
// data and parity disagreeing (a write in flight reached some of its
// members: the write hole); with a member lost, its chunks of such a
// stripe are rebuilt from that parity and come out wrong, silently, even
// where nothing was being written. Resync cannot help: the lost chunk
// is what it would need. Forced, the array starts and the stripes the
// crash caught may hold wrong data (md's "data corruption possible").
//
// An array with the write-hole log is let through, marked DirtyDegraded:
// the log's replay recomputes the parity of every stripe a write was in
// flight on, from the data outside it and the entry (md starts a dirty
// degraded array with PPL likewise); its caller refuses it when an entry
// cannot be replayed (a member the entry needs is missing).
func checkDirtyDegraded(a *Assembly, opt AssembleOptions) error {
	if a.Clean || !a.Degraded || a.Failed || opt.Force {
		return nil
	}
	if a.Freshest != nil && a.Freshest.LogBytes > 0 {
		a.DirtyDegraded = true
		return nil
	}
	return DirtyDegradedError(a, a.Members-a.ActiveRoles, "")
}

// DirtyDegradedError is the refusal of dirty assembly a with notInSync
// roles not in sync, with why (if not empty) said after what.
func DirtyDegradedError(a *Assembly, notInSync int, why string) error {
	if why != "" {
		why = " (" + why + ")"
	}
	return fmt.Errorf("%w: %s array %s was not stopped cleanly and %d of its %d roles are not in sync%s: "+
		"a write interrupted by the crash may have left data and parity disagreeing, which would rebuild the lost chunks wrong; "+
		"start it with force only if you accept that (mdadm --force), or give back the missing members",
		ErrDirtyDegraded, Level(a.Level), arrayDesc(a.Freshest), notInSync, a.Members, why)
}
