package engine

import (
	"slices"
	"testing"
)

// replacedRole2 returns the superblocks of a raid5 of 3 with a spare
// (index 3) at each generation: role 2's member (vdd in the tests) drops
// out (g2 records it failed); the spare (vdc) takes role 2 and is being
// rebuilt (g3); it fails during its rebuild (g4 records role 2 failed,
// on it); writes go on (g5); then a power cut takes role 1.
func replacedRole2(t *testing.T) (g1, g3, g5 []*Superblock) {
	g1 = asmNewArray(t, 5, uint32(LeftSymmetric), 3, 1)
	g2 := asmNext(g1, fail(2))
	g3 = asmNext(g2, func(sb *Superblock) {
		sb.Roles[2] = RoleEntry{State: RoleRebuilding, RecoveryOffset: 2048, Member: g1[3].MemberUUID}
		sb.Roles[3] = RoleEntry{}
	})
	g3[3].Role = 2 // the spare's own superblock takes role 2
	g4 := asmNext(g3, func(sb *Superblock) { fail(2)(sb); sb.Roles[2].RecoveryOffset = 0 })
	g5 = asmNext(g4, nil)
	return g1, g3, g5
}

// Found by review. Given vda (role 0, g5), vdc (role 2's current
// device, g3, its own table: rebuilding) and vdd (role 2's device before it was replaced, g1),
// --force put vdd in sync as it is: vdc was skipped as rebuilding, and
// forceUp fell through to the next stale member claiming role 2, older
// than vdc. mdadm's force_array only ever considers the best (freshest)
// device of each role, so it forces nothing into role 2 and the array
// does not start. vdd's data predates g2: the array failed it and gave
// its role to another device, which took writes since (below its
// rebuild position, the newest copy of role 2 is on vdc).
func TestForceUpSkipsOlderHolderOfReplacedRole(t *testing.T) {
	g1, g3, g5 := replacedRole2(t)
	in := asmInputs(t, g5[0], g1[1], g3[3], g1[2])
	ms := []MemberSB{in[0], in[2], in[3]} // vda, vdc, vdd
	a, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatalf("refused: %v (want an assembly that cannot start)", err)
	}
	if got := forcedUp(a); !slices.Equal(got, []uint64{0, 0, 0}) {
		t.Errorf("promoted events = %v, want none: /dev/vdd (events 1, replaced in role 2 at events 3) is older than role 2's device /dev/vdc (events 3)", got)
	}
	if !a.Failed {
		t.Errorf("not failed: roles %+v", a.Roles)
	}
}

// TestForceUpReplacedHolderAlone pins a decision (it passed before the
// fix above too): a stale member the freshest table no longer names for
// its role, because another device took the role since, is still put in
// sync when that device is not given (or claims no role by its own
// superblock): it is then the role's freshest device at hand, as
// mdadm's best device of the role, and its data is trusted as any stale
// member's (the writes it missed are lost).
func TestForceUpReplacedHolderAlone(t *testing.T) {
	g1, _, g5 := replacedRole2(t)
	in := asmInputs(t, g5[0], g1[1], g5[3], g1[2])
	ms := []MemberSB{in[0], in[3]} // vda, vdd
	a, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := forcedUp(a); !slices.Equal(got, []uint64{0, 0, 1}) {
		t.Errorf("promoted events = %v, want [0 0 1]", got)
	}
	if a.Failed || a.Roles[2].Path != "/dev/vdd" {
		t.Errorf("failed %v, role 2 %+v", a.Failed, a.Roles[2])
	}
}
