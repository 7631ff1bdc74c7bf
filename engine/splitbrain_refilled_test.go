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

// A 3-way mirror A, B, C: C fails (recorded on A and B), A dies unrecorded
// on itself, C is re-added, a spare S takes A's role, then B fails and T
// takes its role. The old A records C failed, and A's role went to S: from
// the two superblocks this is the split brain above (B, the one member
// that ran with both, is gone), so A given with S, T and C is refused, as
// Diverged says of histories only a bridging member tells apart. Left out,
// or with --force, the array assembles, without A.
func TestOldMemberAfterEveryRoleChangedIsAmbiguous(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 3, 0)
	a0 := asmNext(sbs[:2], func(sb *Superblock) { sb.Roles[2].State = RoleFaulty })
	aOld := a0[0]
	g := asmNext(a0[1:], func(sb *Superblock) { sb.Roles[0].State = RoleFaulty })
	cu := sbs[2].MemberUUID
	g = asmNext(g, func(sb *Superblock) { sb.Roles[2] = RoleEntry{State: RoleRebuilding, Member: cu} })
	csb := *g[0]
	csb.Role, csb.MemberUUID = 2, cu
	g = asmNext([]*Superblock{g[0], &csb}, func(sb *Superblock) { sb.Roles[2].State = RoleActive })
	s := sbUUID(0x53)
	g = asmNext(g, func(sb *Superblock) { sb.Roles[0] = RoleEntry{State: RoleRebuilding, Member: s} })
	ssb := *g[0]
	ssb.Role, ssb.MemberUUID = 0, s
	g = asmNext([]*Superblock{g[0], g[1], &ssb}, func(sb *Superblock) { sb.Roles[0].State = RoleActive })
	g = asmNext(g[1:], func(sb *Superblock) { sb.Roles[1].State = RoleFaulty })
	tu := sbUUID(0x54)
	g = asmNext(g, func(sb *Superblock) { sb.Roles[1] = RoleEntry{State: RoleRebuilding, Member: tu} })
	tsb := *g[0]
	tsb.Role, tsb.MemberUUID = 1, tu
	g = asmNext([]*Superblock{g[0], g[1], &tsb}, func(sb *Superblock) { sb.Roles[1].State = RoleActive })

	_, err := Assemble(asmInputs(t, g[0], g[1], g[2], aOld))
	asmWantErr(t, err, ErrSplitBrain, "gave its role to another device")
	a := mustAssemble(t, asmInputs(t, g[0], g[1], g[2]))
	if a.ActiveRoles != 3 {
		t.Fatalf("without the old member: %d active roles", a.ActiveRoles)
	}
	a, err = AssembleWith(asmInputs(t, g[0], g[1], g[2], aOld), AssembleOptions{Force: true})
	if err != nil || a.ActiveRoles != 3 || len(a.Stale) != 1 {
		t.Fatalf("forced: %v", err)
	}
}
