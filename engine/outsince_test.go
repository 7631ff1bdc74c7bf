package engine

import "testing"

// rv2Replaced is a raid6 of A, B, C, D (roles 0..3) after D dropped out
// unrecorded on itself (its superblock still has every role active), its
// failure recorded since generation since, and A, B and C were then
// replaced one at a time by new members. It returns D's old superblock
// and the new members' (roles 0, 1, 2).
func rv2Replaced(t *testing.T, since func(g uint64) uint64) (*Superblock, []*Superblock) {
	t.Helper()
	sbs := asmNewArray(t, 6, 2, 4, 0)
	d := sbs[3]
	g := asmNext(sbs[:3], func(sb *Superblock) {
		sb.Roles[3].State = RoleFaulty
		sb.Roles[3].OutSince = since(sb.Events)
	})
	for r := range 3 {
		u := sbUUID(byte(0x60 + r))
		g = asmNext(g, func(sb *Superblock) { sb.Roles[r] = RoleEntry{State: RoleRebuilding, Member: u} })
		n := *g[0]
		n.Role, n.MemberUUID = uint32(r), u
		g[r] = &n
		g = asmNext(g, func(sb *Superblock) { sb.Roles[r].State = RoleActive })
	}
	g = asmNext(g, func(sb *Superblock) { sb.Clean = true }) // stopped
	return d, g
}

// A member that dropped out never took the generation that recorded it
// out: whoever holds the other roles since, it is stale, not a split
// brain (md kicks it as non-fresh, and re-adds it). Its events are below
// the out-since generation its failure was recorded at.
func TestStaleAfterPeersReplacedNotSplitBrain(t *testing.T) {
	d, g := rv2Replaced(t, func(g uint64) uint64 { return g })
	if Diverged(d, g[0]) || Diverged(g[0], d) {
		t.Fatalf("D (events %d, recorded out since %d) diverged from the array (events %d)", d.Events, g[0].Roles[3].OutSince, g[0].Events)
	}
	a, err := Assemble(asmInputs(t, g[0], g[1], g[2], d))
	if err != nil {
		t.Fatalf("assembly with the stale member: %v", err)
	}
	if len(a.Stale) != 1 || a.Stale[0] != asmPath(3) || a.ActiveRoles != 3 {
		t.Fatalf("stale %q, %d active roles", a.Stale, a.ActiveRoles)
	}
}

// The same tables where D's events are at or past the generation that
// recorded it out: its side went on writing after the other side wrote it
// off, and gave roles to other devices: a split brain, as is an unknown
// generation (0: a superblock written before the field was).
func TestRanAfterRecordedOutIsSplitBrain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		since func(uint64) uint64
	}{
		{"unknown", func(uint64) uint64 { return 0 }},
		{"at its events", func(g uint64) uint64 { return g - 1 }},
		{"below its events", func(g uint64) uint64 { return 1 }},
	} {
		d, g := rv2Replaced(t, tc.since)
		if !Diverged(d, g[0]) || !Diverged(g[0], d) {
			t.Errorf("%s: D (events %d, recorded out since %d) did not diverge", tc.name, d.Events, g[0].Roles[3].OutSince)
		}
		_, err := Assemble(asmInputs(t, g[0], g[1], g[2], d))
		asmWantErr(t, err, ErrSplitBrain, "went on writing after that generation")
	}
}
