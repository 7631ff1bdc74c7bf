package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fail returns a change that records roles failed, as the array writes
// the generation after a member dropped out by I/O errors (the dropped
// member's own superblock keeps the generation before).
func fail(roles ...int) func(*Superblock) {
	return func(sb *Superblock) {
		for _, r := range roles {
			sb.Roles[r].State = RoleFaulty
		}
		sb.Clean = false
	}
}

// forcedUp lists, per role, the events a promoted role's member had, 0
// for the others.
func forcedUp(a *Assembly) []uint64 {
	var out []uint64
	for _, ra := range a.Roles {
		if ra.Promoted {
			out = append(out, ra.PromotedEvents)
		} else {
			out = append(out, 0)
		}
	}
	return out
}

// TestAssembleForceUpRaid5: raid5 of 3; vdc drops out by I/O errors
// (generation 2 records it failed, its own superblock stays at 1), writes
// go on, a power cut takes vdb. vda alone cannot start the array; with
// --force, vdc is put in sync as it is (mdadm's "forcing event count"),
// not rebuilt from a single member, which rebuilds nothing.
func TestAssembleForceUpRaid5(t *testing.T) {
	g1 := asmNewArray(t, 5, uint32(LeftSymmetric), 3, 0)
	g2 := asmNext(g1, fail(2))
	g3 := asmNext(g2, nil)
	ms := []MemberSB{asmInputs(t, g3[0])[0], asmInputs(t, g1[0], g1[1], g1[2])[2]}

	a := mustAssemble(t, ms) // unforced: refused by its callers, as before
	asmWantRoles(t, a, "active /dev/vda", "missing", "faulty /dev/vdc")
	if !a.Failed {
		t.Errorf("unforced: not failed")
	}

	a, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	asmWantRoles(t, a, "active /dev/vda", "missing", "active /dev/vdc")
	asmWantCounts(t, a, 2, 0, 0, 1, true, false)
	if got := forcedUp(a); !slices.Equal(got, []uint64{0, 0, 1}) {
		t.Errorf("promoted events = %v, want [0 0 1]", got)
	}
	if a.Roles[2].Forced || len(a.Stale) != 0 || a.Events != 3 {
		t.Errorf("forced %v, stale %q, events %d", a.Roles[2].Forced, a.Stale, a.Events)
	}

	// A member whose own table says it was rebuilding holds nothing
	// above its offset: never put in sync.
	r := *g1[2]
	r.Roles[2] = RoleEntry{State: RoleRebuilding, RecoveryOffset: 100, Member: r.MemberUUID}
	ms[1] = asmInputs(t, g1[0], g1[1], &r)[2]
	a, err = AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Failed || a.Roles[2].Promoted {
		t.Errorf("rebuilding member: failed %v, promoted %v", a.Failed, a.Roles[2].Promoted)
	}
}

// TestAssembleForceUpOnlyAsNeeded: raid6 of 5 loses vde, then vdd, then
// vdc, one generation each, then vdb in a power cut. Three must be in
// sync: vdc and vdd (the freshest of the stale) are put in sync, vde is
// still rebuilt in full. Of two that dropped out at once, the first given
// is put in sync.
func TestAssembleForceUpOnlyAsNeeded(t *testing.T) {
	g1 := asmNewArray(t, 6, uint32(RightAsymmetric), 5, 0)
	g2 := asmNext(g1, fail(4))
	g3 := asmNext(g2, fail(3))
	g4 := asmNext(g3, fail(2))
	in := func(sbs ...*Superblock) []MemberSB { return asmInputs(t, sbs...) }
	ms := in(g4[0], g4[1], g3[2], g2[3], g1[4])
	ms = append(ms[:1], ms[2:]...) // vdb is gone
	a, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	asmWantRoles(t, a, "active /dev/vda", "missing", "active /dev/vdc", "active /dev/vdd", "rebuilding /dev/vde@0")
	asmWantCounts(t, a, 3, 1, 0, 1, true, false)
	if got := forcedUp(a); !slices.Equal(got, []uint64{0, 0, 3, 2, 0}) {
		t.Errorf("promoted events = %v", got)
	}
	if !a.Roles[4].Forced {
		t.Errorf("vde not rebuilt in full")
	}

	// Roles 2 and 3 drop out together, a power cut takes role 1: one of
	// the two is needed, of equal events the first given.
	h2 := asmNext(g1, fail(2, 3))
	h3 := asmNext(h2, nil)
	ms = in(h3[0], g1[3], g1[2], h3[4]) // vda, vdb (role 3), vdc (role 2), vdd (role 4)
	a, err = AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	asmWantRoles(t, a, "active /dev/vda", "missing", "rebuilding /dev/vdc@0", "active /dev/vdb", "active /dev/vdd")
	ms[1], ms[2] = ms[2], ms[1]
	a, err = AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	asmWantRoles(t, a, "active /dev/vda", "missing", "active /dev/vdc", "rebuilding /dev/vdb@0", "active /dev/vdd")
}

// TestAssembleForceUpRaid10: raid10 near 2 of 4 ({0,1} and {2,3} mirror
// each other). Role 1 drops out, then role 3, then a power cut takes
// role 0: the pair {0,1} has no copy in sync. Role 1 is put in sync;
// role 3, fresher but not needed (role 2 holds its pair), is rebuilt.
func TestAssembleForceUpRaid10(t *testing.T) {
	g1 := asmNewArray(t, 10, 0x102, 4, 0)
	g2 := asmNext(g1, fail(1))
	g3 := asmNext(g2, fail(3))
	g4 := asmNext(g3, nil)
	ms := asmInputs(t, g1[1], g4[2], g2[3]) // vda: role 1, vdb: role 2, vdc: role 3
	if a := mustAssemble(t, ms); !a.Failed {
		t.Errorf("unforced: not failed")
	}
	a, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	asmWantRoles(t, a, "missing", "active /dev/vda", "active /dev/vdb", "rebuilding /dev/vdc@0")
	if got := forcedUp(a); !slices.Equal(got, []uint64{0, 1, 0, 0}) || a.Failed {
		t.Errorf("promoted events = %v, failed %v", got, a.Failed)
	}
}

// TestAssembleForceUpRaid0: a raid0 member two generations behind (beyond
// the slack) is stale, and a raid0 cannot start without it: forced, it
// is put in sync (no rebuild is possible on raid0).
func TestAssembleForceUpRaid0(t *testing.T) {
	g1 := asmNewArray(t, 0, 0, 2, 0)
	g3 := asmNext(asmNext(g1, nil), nil)
	ms := asmInputs(t, g3[0], g1[1])
	if a := mustAssemble(t, ms); !a.Failed {
		t.Errorf("unforced: not failed")
	}
	a, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	asmWantRoles(t, a, "active /dev/vda", "active /dev/vdb")
	if a.Failed || a.Degraded || !a.Roles[1].Promoted {
		t.Errorf("failed %v, degraded %v, promoted %v", a.Failed, a.Degraded, a.Roles[1].Promoted)
	}
}

// TestForceUpSkipsOtherSideOfSplitBrain: Found by review. With --force of
// members of both sides of a split brain whose kept side could not start
// the array alone, forceUp put a member of the other side in sync as it
// was beside the kept side's: one array served from two diverged
// histories (silent corruption). raid10 near-2 of 4 ({0,1} and {2,3}
// mirror each other): side A ran with roles 0 and 2, side B with 1 and 3
// (each holds a copy of every chunk); raid6 of 4: A with roles 0 and 1, B
// with 2 and 3. Given A's role 0 and B's two, A is kept (the freshest, or
// the first given) and cannot start alone: the assembly is refused as a
// split brain naming the other side, and giving only that side keeps it.
func TestForceUpSkipsOtherSideOfSplitBrain(t *testing.T) {
	type split struct {
		name       string
		level      uint32
		layout     uint32
		outA, outB [2]int // roles each side records missing
		gens       [2]int // generations each side wrote
	}
	for _, c := range []split{
		{"raid10 n2 same events", 10, 0x102, [2]int{1, 3}, [2]int{0, 2}, [2]int{2, 2}},
		{"raid10 n2 A fresher", 10, 0x102, [2]int{1, 3}, [2]int{0, 2}, [2]int{3, 2}},
		{"raid6", 6, uint32(LeftSymmetric), [2]int{2, 3}, [2]int{0, 1}, [2]int{2, 2}},
	} {
		g1 := asmNewArray(t, c.level, c.layout, 4, 0)
		run := func(out [2]int, gens int) []*Superblock {
			s := g1
			for i := range gens {
				s = asmNext(s, func(sb *Superblock) {
					if i == 0 {
						sb.Roles[out[0]].State, sb.Roles[out[1]].State = RoleMissing, RoleMissing
					}
					sb.Clean = false
				})
			}
			return s
		}
		a, b := run(c.outA, c.gens[0]), run(c.outB, c.gens[1])
		mine := c.outB[0]                                   // a role side A ran with
		theirs := []*Superblock{b[c.outA[0]], b[c.outA[1]]} // side B's members
		ms := asmInputs(t, a[mine], theirs[0], theirs[1])
		if _, err := Assemble(ms); !errors.Is(err, ErrSplitBrain) {
			t.Fatalf("%s: unforced: %v, want a split brain", c.name, err)
		}
		x, err := AssembleWith(ms, AssembleOptions{Force: true})
		if err == nil {
			for r, ra := range x.Roles {
				if ra.Promoted {
					t.Errorf("%s: role %d (%s, the other side) put in sync as it is beside the kept side's %s", c.name, r, ra.Path, ms[0].Path)
				}
			}
			t.Fatalf("%s: forced: assembled, want a refusal", c.name)
		}
		if !errors.Is(err, ErrSplitBrain) || !strings.Contains(err.Error(), "add --force /dev/vdb /dev/vdc") {
			t.Errorf("%s: forced: %v, want a split brain naming the other side's members", c.name, err)
		}
		// Only the other side given: it is kept.
		y, err := AssembleWith(asmInputs(t, theirs[0], theirs[1]), AssembleOptions{Force: true})
		if err != nil || y.Failed {
			t.Fatalf("%s: the other side alone: %v", c.name, err)
		}
		for r, ra := range y.Roles {
			if ra.Promoted {
				t.Errorf("%s: the other side alone: role %d promoted", c.name, r)
			}
		}
	}
}

// TestForceUpDropsPromotedNotNeeded: Found by review. On raid10 with three
// copies, the freshest-first loop put in sync a member that a later one
// made unnecessary, and kept it: a stale member trusted as it was where
// nothing needed it (and its copies disagreed with the later one's). raid10
// near-3 of 5 (chunk c on roles 3c..3c+2 mod 5: {0,1,2}, {3,4,0},
// {1,2,3}, {4,0,1}, {2,3,4}); roles 0, 2 and 3 drop out in that order, a
// power cut takes role 1; role 4 is in sync. Role 3 (the freshest) adds
// {1,2,3}, then role 2 is needed for {0,1,2} and holds {1,2,3} too: role 3
// goes back to a full rebuild, and role 2 alone is in sync as it is.
func TestForceUpDropsPromotedNotNeeded(t *testing.T) {
	g1 := asmNewArray(t, 10, 0x103, 5, 0)
	g2 := asmNext(g1, fail(0))
	g3 := asmNext(g2, fail(2))
	g4 := asmNext(g3, fail(3))
	g5 := asmNext(g4, nil)
	ms := asmInputs(t, g5[4], g1[0], g2[2], g3[3]) // vda: role 4; vdb: 0, vdc: 2, vdd: 3
	a, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	var promoted []int
	for r, ra := range a.Roles {
		if ra.Promoted {
			promoted = append(promoted, r)
		}
	}
	if !slices.Equal(promoted, []int{2}) {
		t.Errorf("promoted roles %v, want [2] (role 2 alone gives every chunk a copy with role 4)", promoted)
	}
	if ra := a.Roles[3]; ra.State != RoleRebuilding || !ra.Forced || ra.Path != "/dev/vdd" {
		t.Errorf("role 3: %+v, want /dev/vdd rebuilt in full", ra)
	}
	if a.Failed {
		t.Error("failed")
	}
}
