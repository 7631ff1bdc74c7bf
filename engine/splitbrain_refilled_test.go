package engine

import "testing"

// Raid1 A (role 0), B (role 1). B drops out (I/O errors: its own
// superblock is not written); A records it faulty, and a hot spare S takes
// role 1 and is rebuilt: A's table no longer names B at all. B is then
// started alone (A missing) and written to, over more generations than A's
// side. Given together, the two sides ran without each other: a split
// brain, which must not be resolved silently by the higher events.
func TestSplitBrainAfterRoleRefilled(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 2, 0)
	g := asmNext(sbs[:1], func(sb *Superblock) { sb.Roles[1].State = RoleFaulty })
	s := sbUUID(0x53)
	g = asmNext(g, func(sb *Superblock) { sb.Roles[1] = RoleEntry{State: RoleRebuilding, Member: s} })
	g = asmNext(g, func(sb *Superblock) { sb.Roles[1].State = RoleActive })
	ssb := *g[0]
	ssb.Role, ssb.MemberUUID = 1, s
	b := sbs[1]
	for range 5 {
		b = asmNext([]*Superblock{b}, func(sb *Superblock) { sb.Roles[0].State = RoleMissing })[0]
	}
	for _, ms := range [][]MemberSB{asmInputs(t, g[0], &ssb, b), asmInputs(t, g[0], b)} {
		a, err := Assemble(ms)
		if err == nil {
			t.Fatalf("assembled (stale %q): the side that ran alone (events %d) silently wins over A's side (events %d)", a.Stale, b.Events, g[0].Events)
		}
		asmWantErr(t, err, ErrSplitBrain)
	}
}

// The same history without the split: B failed and was replaced by S,
// then A failed and was replaced by T (rebuilt from S). The old members,
// given with the new ones, are stale, not a split brain: neither old
// table records a member of the new side failed.
func TestReplacedTwiceNotSplitBrain(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 2, 0)
	a0, b0 := sbs[0], sbs[1]
	g := asmNext(sbs[:1], func(sb *Superblock) { sb.Roles[1].State = RoleFaulty })
	s := sbUUID(0x53)
	g = asmNext(g, func(sb *Superblock) { sb.Roles[1] = RoleEntry{State: RoleRebuilding, Member: s} })
	g = asmNext(g, func(sb *Superblock) { sb.Roles[1].State = RoleActive })
	ssb := *g[0]
	ssb.Role, ssb.MemberUUID = 1, s
	// A fails unrecorded on itself; S goes on and T takes role 0.
	sg := asmNext([]*Superblock{&ssb}, func(sb *Superblock) { sb.Roles[0].State = RoleFaulty })
	tu := sbUUID(0x54)
	sg = asmNext(sg, func(sb *Superblock) { sb.Roles[0] = RoleEntry{State: RoleRebuilding, Member: tu} })
	sg = asmNext(sg, func(sb *Superblock) { sb.Roles[0].State = RoleActive })
	tsb := *sg[0]
	tsb.Role, tsb.MemberUUID = 0, tu
	for _, old := range []*Superblock{a0, b0} {
		a, err := Assemble(asmInputs(t, &tsb, sg[0], old))
		if err != nil {
			t.Fatalf("T, S and an old member: %v", err)
		}
		if len(a.Stale) != 1 {
			t.Fatalf("stale %q, want the old member", a.Stale)
		}
	}
}
