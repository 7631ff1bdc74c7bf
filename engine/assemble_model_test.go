package engine

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// asmModel is one raid1 array over time, as the daemon runs it: member
// failures (recorded in the survivors' superblocks, and by hand also in
// the failed member's own), removals, re-adds, replacements, superblock
// updates torn by a crash, and restarts. Every device keeps the last
// superblock written to it and the version of the data it holds.
type asmModel struct {
	t       *rapid.T
	table   Superblock // the array's current superblock (role table), Role/Member unset
	devs    []*asmDev
	holder  []int // device index holding each role
	version int   // data version: bumped by writes, held by every in-sync member
}

type asmDev struct {
	sb   *Superblock
	data int
}

func newAsmModel(t *rapid.T, members int) *asmModel {
	sbs := asmNewArray(t, 1, 0, members, 0)
	m := &asmModel{t: t, table: *sbs[0]}
	for i, sb := range sbs {
		m.devs = append(m.devs, &asmDev{sb: sb})
		m.holder = append(m.holder, i)
	}
	return m
}

// write writes the next generation to every in-sync member except skip
// (a torn update: -1 for none), and to the devices in also.
func (m *asmModel) write(skip int, also ...int) {
	m.table.Events++
	for r, d := range m.holder {
		e := m.table.Roles[r]
		if e.State != RoleActive || r == skip {
			continue
		}
		m.store(d, r)
	}
	for _, r := range also {
		m.store(m.holder[r], r)
	}
}

func (m *asmModel) store(d, r int) {
	sb := m.table
	sb.Role = uint32(r)
	sb.MemberUUID = m.table.Roles[r].Member
	if err := sb.Validate(); err != nil {
		m.t.Fatalf("model superblock: %v", err)
	}
	m.devs[d].sb = &sb
}

func (m *asmModel) active() (rs []int) {
	for r := range m.holder {
		if m.table.Roles[r].State == RoleActive {
			rs = append(rs, r)
		}
	}
	return rs
}

// assemble gives every in-sync device and some others, and checks that
// the assembly trusts exactly the in-sync ones.
func (m *asmModel) assemble(t *rapid.T) {
	var sbs []*Superblock
	var paths []string
	inSync := map[string]bool{}
	for _, r := range m.active() {
		d := m.holder[r]
		sbs = append(sbs, m.devs[d].sb)
		paths = append(paths, fmt.Sprint("dev", d))
		inSync[paths[len(paths)-1]] = true
	}
	for d, dev := range m.devs {
		if !inSync[fmt.Sprint("dev", d)] && rapid.Bool().Draw(t, "give stale") {
			sbs = append(sbs, dev.sb)
			paths = append(paths, fmt.Sprint("dev", d))
		}
	}
	ms := make([]MemberSB, len(sbs))
	for i := range sbs {
		ms[i] = MemberSB{Path: paths[i], SB: sbs[i]}
	}
	a, err := Assemble(ms)
	if errors.Is(err, ErrSplitBrain) {
		// Members recording each other gone with none in common, and
		// no member given that ran with both (see Diverged): one
		// history cannot be told from a split without it. The freshest
		// is the current side, which --force keeps.
		a, err = AssembleWith(ms, AssembleOptions{Force: true})
		if err != nil {
			t.Fatalf("forced assembly of %v: %v", paths, err)
		}
		m.check(t, a, paths)
		return
	}
	if err != nil {
		t.Fatalf("assembly of %v: %v", paths, err)
	}
	m.check(t, a, paths)
}

// check checks that a trusts exactly the in-sync devices.
func (m *asmModel) check(t *rapid.T, a *Assembly, paths []string) {
	trusted := 0
	for r, ra := range a.Roles {
		if ra.State != RoleActive && ra.State != RoleRebuilding || ra.Forced {
			continue
		}
		trusted++
		var d int
		fmt.Sscan(ra.Path[3:], &d)
		if m.devs[d].data != m.version {
			t.Fatalf("role %d trusted on %s with data version %d, current %d", r, ra.Path, m.devs[d].data, m.version)
		}
	}
	if trusted != len(m.active()) {
		t.Fatalf("%d roles trusted, %d in sync: %+v", trusted, len(m.active()), a.Roles)
	}
}

// TestAssembleModelOneHistory: whatever happened to an array in one
// history (no member run on its own), assembling its in-sync members with
// any of the others trusts exactly the in-sync ones, even after a torn
// superblock update; where it sees a split brain (an old member recording
// a current one gone, and recorded gone by it, with no member given that
// ran with both), --force trusts exactly the in-sync ones.
func TestAssembleModelOneHistory(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newAsmModel(t, rapid.IntRange(2, 4).Draw(t, "members"))
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			m.step(t)
		}
		m.assemble(t)
	})
}

// step does one random thing to the array.
func (m *asmModel) step(t *rapid.T) {
	act := m.active()
	r := rapid.IntRange(0, len(m.holder)-1).Draw(t, "role")
	e := &m.table.Roles[r]
	switch rapid.IntRange(0, 6).Draw(t, "op") {
	case 0: // user writes
		m.version++
		for _, r := range act {
			m.devs[m.holder[r]].data = m.version
		}
	case 1: // fail (by hand: its own superblock records it too)
		if e.State != RoleActive || len(act) < 2 {
			return
		}
		e.State = RoleFaulty
		if rapid.Bool().Draw(t, "by hand") {
			m.write(-1, r)
		} else {
			m.write(-1)
		}
	case 2: // remove
		if e.State != RoleFaulty {
			return
		}
		e.State = RoleMissing
		m.write(-1)
	case 3, 4: // re-add the device that left, or replace it
		if e.State != RoleFaulty && e.State != RoleMissing {
			return
		}
		if rapid.Bool().Draw(t, "replace") {
			m.devs = append(m.devs, &asmDev{})
			m.holder[r] = len(m.devs) - 1
			e.Member = sbUUID(byte(0x80 + len(m.devs)))
		}
		e.State = RoleRebuilding
		m.write(-1)
		m.devs[m.holder[r]].data = m.version
		e.State = RoleActive
		m.write(-1)
	case 5: // an update torn by a crash, then a restart
		m.write(act[rapid.IntRange(0, len(act)-1).Draw(t, "torn")])
		m.assemble(t)
		m.write(-1) // the restarted array writes its next generation
	case 6: // restart
		m.assemble(t)
		m.write(-1)
	}
}

// TestAssembleModelSplit: after any one history, the in-sync members split
// in two sides, each assembled on its own and written to; a member of
// each side given together (with any others) is always refused as a split
// brain, whichever side is fresher.
func TestAssembleModelSplit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newAsmModel(t, rapid.IntRange(2, 4).Draw(t, "members"))
		for range rapid.IntRange(0, 30).Draw(t, "steps") {
			m.step(t)
		}
		act := m.active()
		if len(act) < 2 {
			return
		}
		act = rapid.Permutation(act).Draw(t, "order")
		cut := rapid.IntRange(1, len(act)-1).Draw(t, "cut")
		sides := [][]int{act[:cut], act[cut:]}
		base := m.table
		var given []MemberSB
		for i, side := range sides {
			m.table = base
			for _, r := range sides[1-i] {
				m.table.Roles[r].State = RoleMissing
			}
			for range rapid.IntRange(1, 4).Draw(t, "generations") {
				m.write(-1)
			}
			r := side[rapid.IntRange(0, len(side)-1).Draw(t, "member")]
			given = append(given, MemberSB{Path: fmt.Sprint("side", i), SB: m.devs[m.holder[r]].sb})
		}
		for d, dev := range m.devs {
			if rapid.Bool().Draw(t, "give another") && dev.sb != given[0].SB && dev.sb != given[1].SB {
				given = append(given, MemberSB{Path: fmt.Sprint("dev", d), SB: dev.sb})
			}
		}
		given = rapid.Permutation(given).Draw(t, "given")
		if _, err := Assemble(given); !errors.Is(err, ErrSplitBrain) {
			t.Fatalf("assembly of both sides: %v, want a split brain", err)
		}
	})
}
