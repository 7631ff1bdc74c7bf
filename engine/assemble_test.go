package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

const asmGiB = 1 << 30

// asmNewArray creates the superblocks of a new array of members then spares,
// all 1 GiB.
func asmNewArray(t sbTB, level, layout uint32, members, spares int) []*Superblock {
	t.Helper()
	spec := ArraySpec{Name: "tank", Level: level, Layout: layout, ChunkSectors: 1024, BitmapBytes: 4096}
	for range members {
		spec.MemberBytes = append(spec.MemberBytes, asmGiB)
	}
	for range spares {
		spec.SpareBytes = append(spec.SpareBytes, asmGiB)
	}
	sbs, err := NewSuperblocks(spec)
	if err != nil {
		t.Fatalf("NewSuperblocks: %v", err)
	}
	return sbs
}

// asmNext returns the superblocks of sbs at the next generation, with change
// applied to the array-wide fields (the same on every member), as the
// daemon writes them to the members it still has.
func asmNext(sbs []*Superblock, change func(*Superblock)) []*Superblock {
	out := make([]*Superblock, len(sbs))
	for i, sb := range sbs {
		c := *sb
		c.Events++
		c.UpdateTime++
		if change != nil {
			change(&c)
		}
		out[i] = &c
	}
	return out
}

func asmPath(i int) string { return "/dev/vd" + string(rune('a'+i)) }

// asmInputs names the superblocks /dev/vda, /dev/vdb, ... and runs each
// through MarshalBinary and ParseSuperblock, as read from a member.
func asmInputs(t sbTB, sbs ...*Superblock) []MemberSB {
	t.Helper()
	ms := make([]MemberSB, len(sbs))
	for i, sb := range sbs {
		b, err := sb.MarshalBinary()
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		ms[i].Path = asmPath(i)
		ms[i].SB, ms[i].Err = ParseSuperblock(b)
		if ms[i].Err != nil {
			t.Fatalf("member %d: %v", i, ms[i].Err)
		}
	}
	return ms
}

// asmRead is a member whose superblock block is b.
func asmRead(path string, b []byte) MemberSB {
	sb, err := ParseSuperblock(b)
	return MemberSB{Path: path, SB: sb, Err: err}
}

func mustAssemble(t sbTB, ms []MemberSB) *Assembly {
	t.Helper()
	a, err := Assemble(ms)
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	return a
}

// asmWantRoles checks each role's state and path ("~path" for a StalePath).
func asmWantRoles(t *testing.T, a *Assembly, want ...string) {
	t.Helper()
	var got []string
	for _, r := range a.Roles {
		s := r.State.String()
		switch {
		case r.Path != "":
			s += " " + r.Path
		case r.StalePath != "":
			s += " ~" + r.StalePath
		}
		if r.State == RoleRebuilding {
			s += fmt.Sprintf("@%d", r.RecoveryOffset)
		}
		got = append(got, s)
	}
	if !slices.Equal(got, want) {
		t.Errorf("roles = %q, want %q", got, want)
	}
}

func asmWantCounts(t *testing.T, a *Assembly, active, rebuilding, faulty, missing int, degraded, failed bool) {
	t.Helper()
	got := []any{a.ActiveRoles, a.RebuildingRoles, a.FaultyRoles, a.MissingRoles, a.Degraded, a.Failed}
	want := []any{active, rebuilding, faulty, missing, degraded, failed}
	if !slices.Equal(got, want) {
		t.Errorf("active, rebuilding, faulty, missing, degraded, failed = %v, want %v", got, want)
	}
}

func asmWantErr(t *testing.T, err error, target error, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Assemble succeeded, want %v", target)
	}
	if !errors.Is(err, target) {
		t.Errorf("err = %v, want errors.Is %v", err, target)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %q, want it to contain %q", err, s)
		}
	}
}

func TestNewSuperblocks(t *testing.T) {
	spec := ArraySpec{
		Name: "tank", Level: 10, Layout: 0x102, ChunkSectors: 1024,
		MemberBytes: []uint64{asmGiB, 2 * asmGiB, asmGiB + 12345, 1 << 40},
		SpareBytes:  []uint64{3 * asmGiB},
		BitmapBytes: 5000,
	}
	sbs, err := NewSuperblocks(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 5 {
		t.Fatalf("%d superblocks, want 5", len(sbs))
	}
	wantOffset := Reserve(1<<40, 5000) // the largest need
	seen := map[[16]byte]bool{}
	for i, sb := range sbs {
		if sb.ArrayUUID != sbs[0].ArrayUUID || sb.Events != 1 || sb.Clean || sb.Members != 4 || sb.Name != "tank" {
			t.Errorf("sb %d: %+v", i, sb)
		}
		if sb.DataOffset != wantOffset || sb.BitmapOffset != 8192 || sb.BitmapBytes != 8192 {
			t.Errorf("sb %d: data offset %d, bitmap %d+%d; want %d, 8192+8192", i, sb.DataOffset, sb.BitmapOffset, sb.BitmapBytes, wantOffset)
		}
		size := append(spec.MemberBytes, spec.SpareBytes...)[i]
		// Members: the array's member size, the smallest's (recorded on
		// each: a degraded assembly keeps it); a spare: its own.
		want := (asmGiB - wantOffset) / 4096 * 8
		if i >= 4 {
			want = (size - wantOffset) / 4096 * 8
		}
		if sb.DataSectors != want {
			t.Errorf("sb %d: data sectors %d, want %d", i, sb.DataSectors, want)
		}
		if err := sb.CheckMemberSize(size); err != nil {
			t.Errorf("sb %d: %v", i, err)
		}
		if sb.Roles != sbs[0].Roles {
			t.Errorf("sb %d: role table differs", i)
		}
		if i < 4 {
			if sb.Role != uint32(i) || sb.Roles[i] != (RoleEntry{State: RoleActive, Member: sb.MemberUUID}) {
				t.Errorf("sb %d: role %d, entry %+v", i, sb.Role, sb.Roles[i])
			}
		} else if sb.Role != SpareRole || sb.Roles[i] != (RoleEntry{State: RoleSpare, Member: sb.MemberUUID}) {
			t.Errorf("spare: role %d, entry %+v", sb.Role, sb.Roles[i])
		}
		for _, u := range [][16]byte{sb.MemberUUID} {
			if seen[u] || u[6]>>4 != 4 || u[8]>>6 != 2 {
				t.Errorf("sb %d: member UUID %s duplicate or not version 4", i, UUIDString(u))
			}
			seen[u] = true
		}
		if _, err := sb.MarshalBinary(); err != nil {
			t.Errorf("sb %d: %v", i, err)
		}
	}
	if seen[sbs[0].ArrayUUID] {
		t.Error("array UUID equals a member UUID")
	}
	a := mustAssemble(t, asmInputs(t, sbs...))
	asmWantRoles(t, a, "active /dev/vda", "active /dev/vdb", "active /dev/vdc", "active /dev/vdd")
	if !slices.Equal(a.Spares, []string{"/dev/vde"}) {
		t.Errorf("spares %q", a.Spares)
	}
	// Another array gets other UUIDs.
	sbs2, err := NewSuperblocks(spec)
	if err != nil {
		t.Fatal(err)
	}
	if sbs2[0].ArrayUUID == sbs[0].ArrayUUID || sbs2[0].MemberUUID == sbs[0].MemberUUID {
		t.Error("UUIDs repeat")
	}
}

func TestNewSuperblocksRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec ArraySpec
		want string
	}{
		{"no members", ArraySpec{Level: 1}, "no members"},
		{"too many", ArraySpec{Level: 1, MemberBytes: make([]uint64, 60), SpareBytes: make([]uint64, 5)}, "at most 64"},
		{"small member", ArraySpec{Level: 1, MemberBytes: []uint64{asmGiB, 2 << 20}}, "member 1 is 2097152 bytes: too small"},
		{"small spare", ArraySpec{Level: 1, MemberBytes: []uint64{asmGiB, asmGiB}, SpareBytes: []uint64{100}}, "spare 0 is 100 bytes"},
		{"huge bitmap", ArraySpec{Level: 1, MemberBytes: []uint64{asmGiB}, BitmapBytes: 1 << 63}, "too large"},
		{"bitmap too big for member", ArraySpec{Level: 1, MemberBytes: []uint64{asmGiB}, BitmapBytes: asmGiB}, "too small"},
		{"raid0 spare", ArraySpec{Level: 0, ChunkSectors: 8, MemberBytes: []uint64{asmGiB, asmGiB}, SpareBytes: []uint64{asmGiB}}, "spare in a RAID 0 array"},
		{"level 4", ArraySpec{Level: 4, ChunkSectors: 8, MemberBytes: []uint64{asmGiB, asmGiB}}, "RAID level 4"},
		{"bad chunk", ArraySpec{Level: 10, Layout: 0x102, ChunkSectors: 12, MemberBytes: []uint64{asmGiB, asmGiB}}, "chunk of 12 sectors"},
		{"bad name", ArraySpec{Level: 1, Name: strings.Repeat("x", 33), MemberBytes: []uint64{asmGiB}}, "longer than 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sbs, err := NewSuperblocks(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewSuperblocks = %d superblocks, %v; want error containing %q", len(sbs), err, tc.want)
			}
		})
	}
}

func TestAssembleFresh(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 2, 1)
	a := mustAssemble(t, asmInputs(t, sbs...))
	if a.UUID != sbs[0].ArrayUUID || a.Name != "tank" || a.Level != 1 || a.Layout != 0 || a.ChunkSectors != 1024 || a.Members != 2 {
		t.Errorf("assembly %+v", a)
	}
	if a.Events != 1 || a.NextEvents() != 2 || a.Clean || a.CreateTime != sbs[0].CreateTime {
		t.Errorf("events %d, next %d, clean %v", a.Events, a.NextEvents(), a.Clean)
	}
	asmWantRoles(t, a, "active /dev/vda", "active /dev/vdb")
	asmWantCounts(t, a, 2, 0, 0, 0, false, false)
	if len(a.Stale) != 0 || !slices.Equal(a.Spares, []string{"/dev/vdc"}) {
		t.Errorf("stale %q, spares %q", a.Stale, a.Spares)
	}
	if *a.Freshest != *sbs[0] {
		t.Errorf("Freshest = %+v", a.Freshest)
	}
	for i, r := range a.Roles {
		if r.Member != sbs[i].MemberUUID {
			t.Errorf("role %d member %s", i, UUIDString(r.Member))
		}
	}
	// Input order does not matter.
	ms := asmInputs(t, sbs...)
	slices.Reverse(ms)
	a = mustAssemble(t, ms)
	asmWantRoles(t, a, "active /dev/vda", "active /dev/vdb")
	if !slices.Equal(a.Spares, []string{"/dev/vdc"}) {
		t.Errorf("spares %q", a.Spares)
	}
}

func TestAssembleCleanAndFreshest(t *testing.T) {
	sbs := asmNext(asmNewArray(t, 1, 0, 2, 0), func(sb *Superblock) { sb.Clean = true })
	ms := asmInputs(t, sbs...)
	a := mustAssemble(t, ms)
	if !a.Clean || a.Events != 2 || a.NextEvents() != 3 {
		t.Errorf("clean %v, events %d", a.Clean, a.Events)
	}
	a.Freshest.Events = 99 // a copy
	if ms[0].SB.Events != 2 || ms[1].SB.Events != 2 {
		t.Error("Freshest aliases an input")
	}
}

func TestAssembleStale(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 3, 0)
	// /dev/vdc missed generations 2 and 3 (more than a crash between
	// superblock writes, EventSlack): its data is not trusted.
	gen2 := asmNext(asmNext(sbs[:2], nil), func(sb *Superblock) { sb.Clean = true })
	a := mustAssemble(t, asmInputs(t, gen2[0], gen2[1], sbs[2]))
	asmWantRoles(t, a, "active /dev/vda", "active /dev/vdb", "missing ~/dev/vdc")
	asmWantCounts(t, a, 2, 0, 0, 1, true, false)
	if !slices.Equal(a.Stale, []string{"/dev/vdc"}) || a.Events != 3 || !a.Clean {
		t.Errorf("stale %q, events %d, clean %v", a.Stale, a.Events, a.Clean)
	}
	if a.Roles[2].Member != sbs[2].MemberUUID {
		t.Error("stale role lost its member UUID")
	}
	// The stale member first: the freshest still wins.
	a = mustAssemble(t, asmInputs(t, sbs[2], gen2[0], gen2[1]))
	asmWantRoles(t, a, "active /dev/vdb", "active /dev/vdc", "missing ~/dev/vda")
	if !slices.Equal(a.Stale, []string{"/dev/vda"}) {
		t.Errorf("stale %q", a.Stale)
	}
}

func TestAssembleFaulty(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 3, 0)
	markFaulty := func(sb *Superblock) { sb.Roles[1].State = RoleFaulty }
	// The survivors recorded /dev/vdb as faulty; its own superblock is older.
	gen2 := asmNext(sbs, markFaulty)
	a := mustAssemble(t, asmInputs(t, gen2[0], sbs[1], gen2[2]))
	asmWantRoles(t, a, "active /dev/vda", "faulty /dev/vdb", "active /dev/vdc")
	asmWantCounts(t, a, 2, 0, 1, 0, true, false)
	if !slices.Equal(a.Stale, []string{"/dev/vdb"}) {
		t.Errorf("stale %q", a.Stale)
	}
	// The faulty member's superblock was written too: still faulty.
	a = mustAssemble(t, asmInputs(t, gen2...))
	asmWantRoles(t, a, "active /dev/vda", "faulty /dev/vdb", "active /dev/vdc")
	if len(a.Stale) != 0 {
		t.Errorf("stale %q", a.Stale)
	}
	// The faulty member is not given: still faulty, no path.
	a = mustAssemble(t, asmInputs(t, gen2[0], gen2[2]))
	asmWantRoles(t, a, "active /dev/vda", "faulty", "active /dev/vdb")
	// All faulty: failed.
	allFaulty := asmNext(sbs, func(sb *Superblock) {
		for i := range 3 {
			sb.Roles[i].State = RoleFaulty
		}
	})
	_, err := Assemble(asmInputs(t, allFaulty...))
	asmWantErr(t, err, ErrFailedMember, "the superblock of /dev/vda records it as failed at events 2", "add --force /dev/vda /dev/vdb /dev/vdc")
	// Forced: the first freshest is authoritative, the others rebuilt.
	a, err = AssembleWith(asmInputs(t, allFaulty...), AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	asmWantRoles(t, a, "active /dev/vda", "rebuilding /dev/vdb@0", "rebuilding /dev/vdc@0")
	asmWantCounts(t, a, 1, 2, 0, 0, true, false)
}

func TestAssembleMissing(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 3, 0)
	a := mustAssemble(t, asmInputs(t, sbs[0], sbs[2]))
	asmWantRoles(t, a, "active /dev/vda", "missing", "active /dev/vdb")
	asmWantCounts(t, a, 2, 0, 0, 1, true, false)
	if a.Roles[1].Member != sbs[1].MemberUUID || a.Roles[1].Path != "" || len(a.Stale) != 0 {
		t.Errorf("role 1 %+v, stale %q", a.Roles[1], a.Stale)
	}
	// The table says missing (the last holder's UUID kept): it comes back
	// with an older superblock, so it is stale.
	gen2 := asmNext(sbs, func(sb *Superblock) { sb.Roles[1].State = RoleMissing })
	a = mustAssemble(t, asmInputs(t, gen2[0], sbs[1], gen2[2]))
	asmWantRoles(t, a, "active /dev/vda", "missing ~/dev/vdb", "active /dev/vdc")
	if !slices.Equal(a.Stale, []string{"/dev/vdb"}) {
		t.Errorf("stale %q", a.Stale)
	}
}

func TestAssembleSparesAndRebuild(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 2, 1)
	a := mustAssemble(t, asmInputs(t, sbs...))
	asmWantCounts(t, a, 2, 0, 0, 0, false, false)
	if !slices.Equal(a.Spares, []string{"/dev/vdc"}) {
		t.Errorf("spares %q", a.Spares)
	}
	// A spare with an older superblock is still a spare.
	gen2 := asmNext(sbs[:2], nil)
	a = mustAssemble(t, asmInputs(t, gen2[0], gen2[1], sbs[2]))
	if !slices.Equal(a.Spares, []string{"/dev/vdc"}) || len(a.Stale) != 0 || a.Degraded {
		t.Errorf("spares %q, stale %q, degraded %v", a.Spares, a.Stale, a.Degraded)
	}

	// Member 1 failed and the spare took its role: generation 2 says
	// role 1 is rebuilding onto the spare.
	spare := sbs[2].MemberUUID
	promote := func(sb *Superblock) {
		sb.Roles[1] = RoleEntry{State: RoleRebuilding, RecoveryOffset: 4096, Member: spare}
		sb.Roles[2] = RoleEntry{}
	}
	gen2 = asmNext([]*Superblock{sbs[0], sbs[2]}, promote)
	gen2[1].Role = 1
	a = mustAssemble(t, asmInputs(t, gen2...))
	asmWantRoles(t, a, "active /dev/vda", "rebuilding /dev/vdb@4096")
	asmWantCounts(t, a, 1, 1, 0, 0, true, false)
	if len(a.Spares) != 0 || len(a.Stale) != 0 {
		t.Errorf("spares %q, stale %q", a.Spares, a.Stale)
	}
	// The replaced member comes back: stale, holding no role.
	a = mustAssemble(t, asmInputs(t, gen2[0], gen2[1], sbs[1]))
	asmWantRoles(t, a, "active /dev/vda", "rebuilding /dev/vdb@4096")
	if !slices.Equal(a.Stale, []string{"/dev/vdc"}) {
		t.Errorf("stale %q", a.Stale)
	}
	// The promoted spare missed generation 2 (its activation was torn):
	// the table names it, but its data is not trusted, and its own
	// superblock says spare. It is a spare again, to be activated anew
	// (it used to be stale, left closed for an operator to add again).
	a = mustAssemble(t, asmInputs(t, gen2[0], sbs[2]))
	asmWantRoles(t, a, "active /dev/vda", "missing")
	if len(a.Stale) != 0 || !slices.Equal(a.Spares, []string{"/dev/vdb"}) {
		t.Errorf("stale %q, spares %q", a.Stale, a.Spares)
	}
	// Updates after it change nothing (a spare's own superblock is not
	// rewritten by them).
	gen3 := asmNext(asmNext(gen2, nil), nil)
	a = mustAssemble(t, asmInputs(t, gen3[0], sbs[2]))
	asmWantRoles(t, a, "active /dev/vda", "missing")
	if len(a.Stale) != 0 || !slices.Equal(a.Spares, []string{"/dev/vdb"}) {
		t.Errorf("stale %q, spares %q", a.Stale, a.Spares)
	}
	// Once the table says the rebuild ended, a device whose own
	// superblock still says spare took no update of it: stale.
	done := asmNext(gen2, func(sb *Superblock) { sb.Roles[1].State, sb.Roles[1].RecoveryOffset = RoleActive, 0 })
	a = mustAssemble(t, asmInputs(t, done[0], sbs[2]))
	asmWantRoles(t, a, "active /dev/vda", "missing ~/dev/vdb")
	if !slices.Equal(a.Stale, []string{"/dev/vdb"}) || len(a.Spares) != 0 {
		t.Errorf("stale %q, spares %q", a.Stale, a.Spares)
	}
}

// TestAssembleSameRole: two members claiming one role.
func TestAssembleSameRole(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 3, 0)
	// impostor claims role 1 with its own member UUID at generation 1
	// (say, an old copy relabelled); generation 3 names the real one.
	impostor := *sbs[1]
	impostor.MemberUUID = sbUUID(0x77)
	impostor.Roles[1].Member = impostor.MemberUUID
	gen2 := asmNext(asmNext([]*Superblock{sbs[0], sbs[2]}, nil), nil)
	a := mustAssemble(t, asmInputs(t, gen2[0], &impostor, sbs[1], gen2[1]))
	asmWantRoles(t, a, "active /dev/vda", "missing ~/dev/vdc", "active /dev/vdd")
	if !slices.Equal(a.Stale, []string{"/dev/vdb", "/dev/vdc"}) {
		t.Errorf("stale %q", a.Stale)
	}

	// Both at the freshest generation: no table is the authority.
	gen2 = asmNext(sbs, nil)
	imp2 := *gen2[1]
	imp2.MemberUUID = sbUUID(0x77)
	imp2.Roles[1].Member = imp2.MemberUUID
	_, err := Assemble(asmInputs(t, gen2[0], gen2[1], &imp2))
	asmWantErr(t, err, ErrCorruptArray, "members /dev/vdb and /dev/vdc both claim role 1 at events 2")
}

func TestAssembleInconsistent(t *testing.T) {
	sbs := asmNewArray(t, 10, 0x102, 4, 0)
	for _, tc := range []struct {
		name   string
		change func(*Superblock)
		want   string
	}{
		{"chunk", func(sb *Superblock) { sb.ChunkSectors = 128 }, "chunk size (1024, 128 sectors)"},
		{"layout", func(sb *Superblock) { sb.Layout = 0x201 }, "layout (0x102, 0x201)"},
		{"name", func(sb *Superblock) { sb.Name = "other" }, `name ("tank", "other")`},
		{"clean", func(sb *Superblock) { sb.Clean = true }, "clean flag"},
		{"created", func(sb *Superblock) { sb.CreateTime++ }, "creation time"},
		{"table", func(sb *Superblock) { sb.Roles[3].State = RoleFaulty }, "role table entry 3 (active "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gen2 := asmNext(sbs, nil)
			tc.change(gen2[2])
			_, err := Assemble(asmInputs(t, gen2...))
			asmWantErr(t, err, ErrCorruptArray, "members /dev/vda and /dev/vdc disagree on the "+tc.want, "at events 2")
			// At an older generation, the disagreement does not matter.
			gen4 := asmNext(asmNext(slices.Concat(gen2[:2], gen2[3:]), nil), nil)
			a := mustAssemble(t, asmInputs(t, gen4[0], gen4[1], gen2[2], gen4[2]))
			if !slices.Equal(a.Stale, []string{"/dev/vdc"}) {
				t.Errorf("stale %q", a.Stale)
			}
		})
	}
	// The update time may differ.
	gen2 := asmNext(sbs, nil)
	gen2[1].UpdateTime += 1000
	mustAssemble(t, asmInputs(t, gen2...))
}

func TestAssembleMixedArrays(t *testing.T) {
	x := asmNewArray(t, 1, 0, 2, 0)
	y := asmNewArray(t, 1, 0, 2, 0)
	for i := range y {
		y[i].Name = "backup"
	}
	_, err := Assemble(asmInputs(t, x[0], y[1], x[1]))
	asmWantErr(t, err, ErrMixedArrays,
		"member /dev/vdb belongs to array "+UUIDString(y[0].ArrayUUID)+` (name "backup"), not `+UUIDString(x[0].ArrayUUID)+` (name "tank") like /dev/vda`)
}

func TestAssembleDuplicates(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 2, 0)
	ms := asmInputs(t, sbs...)
	ms[1].Path = ms[0].Path
	_, err := Assemble(ms)
	asmWantErr(t, err, ErrDuplicateMember, "/dev/vda is given twice")

	_, err = Assemble(asmInputs(t, sbs[0], sbs[1], sbs[0]))
	asmWantErr(t, err, ErrDuplicateMember, "/dev/vda and /dev/vdc are the same member "+UUIDString(sbs[0].MemberUUID))
}

func TestAssembleNoSuperblocks(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 2, 0)
	good := asmInputs(t, sbs...)
	zero := make([]byte, SuperblockSize)
	damaged := sbs[1].encode()
	damaged[1000] ^= 1
	ioErr := errors.New("read /dev/vdc: input/output error")

	_, err := Assemble(nil)
	if err == nil {
		t.Error("Assemble(nil) succeeded")
	}

	// Nothing on any member: the caller may create the array.
	_, err = Assemble([]MemberSB{asmRead("/dev/vda", zero), asmRead("/dev/vdb", zero), {Path: "/dev/vdc"}})
	asmWantErr(t, err, ErrNoSuperblock, "no ublk-raid superblock on /dev/vda, /dev/vdb, /dev/vdc")

	// Some members without one: they are not part of the array.
	_, err = Assemble([]MemberSB{good[0], asmRead("/dev/vdx", zero), good[1]})
	asmWantErr(t, err, ErrNotMember, `member /dev/vdx: not a member of the array `+UUIDString(sbs[0].ArrayUUID)+` (name "tank"), whose superblock /dev/vda carries: no ublk-raid superblock`)
	if errors.Is(err, ErrNoSuperblock) {
		t.Errorf("%v is ErrNoSuperblock: the caller would create an array over members", err)
	}
	_, err = Assemble([]MemberSB{asmRead("/dev/vdx", zero), good[0], asmRead("/dev/vdy", zero)})
	asmWantErr(t, err, ErrNotMember, "members /dev/vdx, /dev/vdy: not a member")

	// A corrupt superblock among good ones.
	_, err = Assemble([]MemberSB{good[0], asmRead("/dev/vdb", damaged)})
	asmWantErr(t, err, ErrCorruptSuperblock, "member /dev/vdb: corrupt superblock: checksum mismatch", "leave it out")
	if !errors.Is(err, ErrBadChecksum) {
		t.Errorf("%v is not ErrBadChecksum", err)
	}

	// All corrupt, or unreadable.
	_, err = Assemble([]MemberSB{asmRead("/dev/vda", damaged), asmRead("/dev/vdb", damaged), {Path: "/dev/vdc", Err: ioErr}, asmRead("/dev/vdd", zero)})
	asmWantErr(t, err, ErrCorruptSuperblock, "member /dev/vda: corrupt superblock", "/dev/vdb: corrupt superblock", "/dev/vdc: read /dev/vdc: input/output error", "no superblock on /dev/vdd")
	if !errors.Is(err, ioErr) || errors.Is(err, ErrNoSuperblock) || strings.Contains(err.Error(), "leave it out") {
		t.Errorf("err = %v", err)
	}
	_, err = Assemble([]MemberSB{good[0], {Path: "/dev/vdc", Err: ioErr}})
	asmWantErr(t, err, ioErr, "member /dev/vdc: read /dev/vdc: input/output error (leave it out")
}

func TestAssembleFailed(t *testing.T) {
	// RAID 0: any missing role fails the array.
	r0 := asmNewArray(t, 0, 0, 3, 0)
	a := mustAssemble(t, asmInputs(t, r0[0], r0[2]))
	asmWantCounts(t, a, 2, 0, 0, 1, true, true)
	a = mustAssemble(t, asmInputs(t, r0...))
	asmWantCounts(t, a, 3, 0, 0, 0, false, false)

	// RAID 1: one member is enough.
	r1 := asmNewArray(t, 1, 0, 3, 0)
	a = mustAssemble(t, asmInputs(t, r1[1]))
	asmWantRoles(t, a, "missing", "active /dev/vda", "missing")
	asmWantCounts(t, a, 1, 0, 0, 2, true, false)

	// RAID 10 n2 on 4: one active role cannot hold the array; with two
	// the engine decides (adjacent pairs are mirrors).
	r10 := asmNewArray(t, 10, 0x102, 4, 0)
	a = mustAssemble(t, asmInputs(t, r10[0]))
	asmWantCounts(t, a, 1, 0, 0, 3, true, true)
	a = mustAssemble(t, asmInputs(t, r10[0], r10[1]))
	asmWantCounts(t, a, 2, 0, 0, 2, true, false)
	a = mustAssemble(t, asmInputs(t, r10[0], r10[3]))
	asmWantCounts(t, a, 2, 0, 0, 2, true, false)

	// A rebuilding role is not active.
	rb := asmNext(r1, func(sb *Superblock) {
		sb.Roles[0].State = RoleRebuilding
		sb.Roles[1].State = RoleFaulty
		sb.Roles[2].State = RoleMissing
	})
	a = mustAssemble(t, asmInputs(t, rb[0], rb[1]))
	asmWantRoles(t, a, "rebuilding /dev/vda@0", "faulty /dev/vdb", "missing")
	asmWantCounts(t, a, 0, 1, 1, 1, true, true)
}

// TestAssembleProperties: members of an array come back at random
// generations, some absent, in any order; the assembly accounts for every
// input once and only trusts the freshest.
func TestAssembleProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		level := rapid.SampledFrom([]uint32{0, 1, 10}).Draw(t, "level")
		var layout uint32
		members := rapid.IntRange(1, 8).Draw(t, "members")
		spares := 0
		if level == 10 {
			layout = 0x102
			members = max(members, 2)
		}
		if level != 0 {
			spares = rapid.IntRange(0, 2).Draw(t, "spares")
		}
		gens := [][]*Superblock{asmNewArray(t, level, layout, members, spares)}
		for range rapid.IntRange(0, 3).Draw(t, "generations") {
			faulty := rapid.IntRange(-1, members-1).Draw(t, "faulty")
			gens = append(gens, asmNext(gens[len(gens)-1], func(sb *Superblock) {
				sb.Clean = !sb.Clean
				if faulty >= 0 {
					sb.Roles[faulty].State = RoleFaulty
				}
			}))
		}
		var sbs []*Superblock
		for i := range members + spares {
			if rapid.IntRange(0, 4).Draw(t, "absent") == 0 {
				continue
			}
			g := rapid.IntRange(0, len(gens)-1).Draw(t, "generation")
			sbs = append(sbs, gens[g][i])
		}
		if len(sbs) == 0 {
			return
		}
		sbs = rapid.Permutation(sbs).Draw(t, "order")
		ms := asmInputs(t, sbs...)
		var maxEvents uint64
		for _, m := range ms {
			maxEvents = max(maxEvents, m.SB.Events)
		}
		a, err := Assemble(ms)
		if errors.Is(err, ErrFailedMember) {
			// Every member given at the freshest generation is faulty
			// there, and no older one is trusted.
			a, err = AssembleWith(ms, AssembleOptions{Force: true})
			if err != nil || a.ActiveRoles+a.RebuildingRoles == 0 {
				t.Fatalf("forced: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Assemble: %v", err)
		}
		if a.Events != maxEvents || len(a.Roles) != members {
			t.Fatalf("events %d (max %d), %d roles", a.Events, maxEvents, len(a.Roles))
		}
		events := map[string]uint64{}
		for _, m := range ms {
			events[m.Path] = m.SB.Events
		}
		seen := map[string]string{}
		see := func(p, where string) {
			if prev, dup := seen[p]; dup && !(prev == "faulty" && where == "stale") {
				t.Fatalf("%s is both %s and %s", p, prev, where)
			}
			seen[p] = where
		}
		counts := map[RoleState]int{}
		for r, ra := range a.Roles {
			counts[ra.State]++
			if ra.Path != "" {
				see(ra.Path, ra.State.String())
				if ra.State != RoleFaulty && events[ra.Path]+EventSlack < maxEvents {
					t.Fatalf("role %d %s on %s at events %d, freshest %d", r, ra.State, ra.Path, events[ra.Path], maxEvents)
				}
			}
			if ra.StalePath != "" {
				if ra.State != RoleMissing || !slices.Contains(a.Stale, ra.StalePath) {
					t.Fatalf("role %d: stale path %s, state %s, stale %q", r, ra.StalePath, ra.State, a.Stale)
				}
			}
		}
		for _, p := range a.Stale {
			see(p, "stale")
			if events[p] >= maxEvents {
				t.Fatalf("%s is stale at the freshest events", p)
			}
		}
		for _, p := range a.Spares {
			see(p, "spare")
		}
		for _, m := range ms {
			if _, ok := seen[m.Path]; !ok {
				t.Fatalf("%s is not accounted for", m.Path)
			}
		}
		if counts[RoleActive] != a.ActiveRoles || counts[RoleRebuilding] != a.RebuildingRoles ||
			counts[RoleFaulty] != a.FaultyRoles || counts[RoleMissing] != a.MissingRoles || len(counts) > 4 {
			t.Fatalf("counts %v vs %+v", counts, a)
		}
		if a.Degraded != (a.ActiveRoles < members) {
			t.Fatalf("degraded %v with %d of %d active", a.Degraded, a.ActiveRoles, members)
		}
	})
}

// TestAssembleTornSuperblockUpdate (issue "Trust under every fault" #6): a
// crash between the members' superblock writes of one generation leaves
// one member a generation behind; it is still current (mdadm's one event
// of slack), so the array assembles instead of failing with 0 members
// active.
func TestAssembleTornSuperblockUpdate(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 2, 0)
	// Role 1 is being rebuilt onto /dev/vdb; a checkpoint rewrites the
	// superblocks with its progress and reaches /dev/vdb only.
	rebuild := asmNext(sbs, func(sb *Superblock) { sb.Roles[1].State = RoleRebuilding })
	checkpoint := asmNext(rebuild, func(sb *Superblock) { sb.Roles[1].RecoveryOffset = 8192 })
	a := mustAssemble(t, asmInputs(t, rebuild[0], checkpoint[1]))
	asmWantRoles(t, a, "active /dev/vda", "rebuilding /dev/vdb@8192")
	asmWantCounts(t, a, 1, 1, 0, 0, true, false)
	if len(a.Stale) != 0 || a.Events != 3 {
		t.Errorf("stale %q, events %d", a.Stale, a.Events)
	}
	// The other way round: the rebuilding member lags, the table's
	// (newer) offset is what counts.
	a = mustAssemble(t, asmInputs(t, checkpoint[0], rebuild[1]))
	asmWantRoles(t, a, "active /dev/vda", "rebuilding /dev/vdb@8192")

	// One generation is the limit.
	gen4 := asmNext(checkpoint, nil)
	a = mustAssemble(t, asmInputs(t, rebuild[0], gen4[1]))
	asmWantRoles(t, a, "missing ~/dev/vda", "rebuilding /dev/vdb@8192")
	asmWantCounts(t, a, 0, 1, 0, 1, true, true)
	// A generation behind but recorded failed by it: stale, and faulty.
	failed := asmNext(sbs, func(sb *Superblock) { sb.Roles[1].State = RoleFaulty })
	a = mustAssemble(t, asmInputs(t, failed[0], sbs[1]))
	asmWantRoles(t, a, "active /dev/vda", "faulty /dev/vdb")
	// Or recorded missing.
	missing := asmNext(sbs, func(sb *Superblock) { sb.Roles[1].State = RoleMissing })
	a = mustAssemble(t, asmInputs(t, missing[0], sbs[1]))
	asmWantRoles(t, a, "active /dev/vda", "missing ~/dev/vdb")
}

// splitSides returns a 2-member raid1 after a split: /dev/vda's side ran
// ga generations after the split without vdb (recording role 1 as
// vdbState), vdb's side gb generations without vda (role 0 missing).
func splitSides(t *testing.T, ga, gb int, vdbState RoleState) (a, b *Superblock) {
	sbs := asmNewArray(t, 1, 0, 2, 0)
	a, b = sbs[0], sbs[1]
	for i := range ga {
		a = asmNext([]*Superblock{a}, func(sb *Superblock) {
			if i == 0 {
				sb.Roles[1].State = vdbState
			}
		})[0]
	}
	for range gb {
		b = asmNext([]*Superblock{b}, func(sb *Superblock) { sb.Roles[0].State = RoleMissing })[0]
	}
	return a, b
}

// TestAssembleSplitBrainRefused (issue #9): raid1 of vdc+vdd; vdd is
// failed (vdc records it faulty at events 4 after more writes); vdd is
// then started alone twice (events 6, recording vdc missing). Given both,
// the higher events must not win silently: every write vdc took after the
// failure would be lost. Refused, naming both members and --force; with
// --force the freshest is authoritative and the other fully rebuilt.
func TestAssembleSplitBrainRefused(t *testing.T) {
	vdc, vdd := splitSides(t, 3, 5, RoleFaulty)
	ms := asmInputs(t, vdc, vdd)
	ms[0].Path, ms[1].Path = "/dev/vdc", "/dev/vdd"
	_, err := Assemble(ms)
	asmWantErr(t, err, ErrSplitBrain, "/dev/vdc (events 4) and /dev/vdd (events 6) each ran without the other",
		"add --force /dev/vdc /dev/vdd to keep the freshest, /dev/vdd")
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
	a, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	asmWantRoles(t, a, "rebuilding /dev/vdc@0", "active /dev/vdd")
	if !a.Roles[0].Forced || a.Roles[1].Forced || len(a.Stale) != 0 {
		t.Errorf("forced %v %v, stale %q", a.Roles[0].Forced, a.Roles[1].Forced, a.Stale)
	}
	// Each side alone assembles (only the members given are known).
	asmWantRoles(t, mustAssemble(t, ms[:1]), "active /dev/vdc", "faulty")
	asmWantRoles(t, mustAssemble(t, ms[1:]), "missing", "active /dev/vdd")
}

// TestAssembleSplitBrainSameEvents (issue #10): raid1 vda+vdb stopped;
// each started alone and written to, the same number of times. Refused
// as a split brain (not as an inconsistent array), whichever side is
// fresher.
func TestAssembleSplitBrainSameEvents(t *testing.T) {
	for _, g := range [][2]int{{2, 2}, {2, 3}, {4, 1}} {
		a, b := splitSides(t, g[0], g[1], RoleMissing)
		_, err := Assemble(asmInputs(t, a, b))
		asmWantErr(t, err, ErrSplitBrain, "/dev/vda", "/dev/vdb", "--force")
	}
}

// TestAssembleNotSplitBrain: members that merely missed updates are not a
// split brain, even when tables record each other failed.
func TestAssembleNotSplitBrain(t *testing.T) {
	// X, Y, W: Y fails (X and W record it), then X fails (W records it),
	// Y is re-added and rebuilt by W. X's table records Y failed while Y
	// is in W's array, but W was with X when X left: X is just stale.
	sbs := asmNewArray(t, 1, 0, 3, 0)
	yFailed := asmNext(sbs, func(sb *Superblock) { sb.Roles[1].State = RoleFaulty })
	xFailed := asmNext(yFailed, func(sb *Superblock) { sb.Roles[0].State = RoleFaulty })
	yBack := asmNext(asmNext(xFailed, func(sb *Superblock) { sb.Roles[1].State = RoleRebuilding }),
		func(sb *Superblock) { sb.Roles[1].State = RoleActive })
	a := mustAssemble(t, asmInputs(t, yFailed[0], yBack[1], yBack[2]))
	asmWantRoles(t, a, "faulty /dev/vda", "active /dev/vdb", "active /dev/vdc")
	// A member that stopped long ago records nobody gone.
	a = mustAssemble(t, asmInputs(t, sbs[0], yBack[1], yBack[2]))
	asmWantRoles(t, a, "faulty /dev/vda", "active /dev/vdb", "active /dev/vdc")
	// The survivor of a failure and the failed member that did not run
	// since: the failed one is stale.
	a = mustAssemble(t, asmInputs(t, yFailed[0], sbs[1]))
	asmWantRoles(t, a, "active /dev/vda", "faulty /dev/vdb", "missing")

	// A, B, C: C fails (A records it), A fails, B rebuilds C, B fails, D
	// takes A's role. A's table records C failed while C is in the
	// array, C's records B (of A's array) failed, and A shares no member
	// with C's array: from A and C alone, a split brain. B, given too,
	// ran with both A's and C's members later than A: one history.
	g := asmNext(sbs, func(sb *Superblock) { sb.Roles[2].State = RoleFaulty })
	aLast := g[0]
	g = asmNext(g, func(sb *Superblock) { sb.Roles[0].State = RoleFaulty })
	g = asmNext(g, func(sb *Superblock) { sb.Roles[2].State = RoleRebuilding })
	g = asmNext(g, func(sb *Superblock) { sb.Roles[2].State = RoleActive })
	bLast := g[1]
	g = asmNext(g, func(sb *Superblock) { sb.Roles[1].State = RoleFaulty })
	d := sbUUID(0x44)
	g = asmNext(g, func(sb *Superblock) { sb.Roles[0] = RoleEntry{State: RoleRebuilding, Member: d} })
	dsb := *g[2]
	dsb.Role, dsb.MemberUUID = 0, d
	_, err := Assemble(asmInputs(t, aLast, g[2], &dsb))
	asmWantErr(t, err, ErrSplitBrain, "/dev/vda (events 2) and /dev/vdb (events 7)")
	a = mustAssemble(t, asmInputs(t, aLast, g[2], &dsb, bLast))
	asmWantRoles(t, a, "rebuilding /dev/vdc@0", "faulty /dev/vdd", "active /dev/vdb")
	if !slices.Equal(a.Stale, []string{"/dev/vda", "/dev/vdd"}) {
		t.Errorf("stale %q", a.Stale)
	}
}

// TestAssembleSplitBrainNotBridgedByOlder: a member older than both sides
// of a split (it stopped before it) holds members of both in its table,
// but does not make them one history.
func TestAssembleSplitBrainNotBridgedByOlder(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 3, 0)
	// vdc stops; vda and vdb write generation 2 (vdc missing).
	g2 := asmNext(sbs[:2], func(sb *Superblock) { sb.Roles[2].State = RoleMissing })
	// Split: vda alone (vdb missing) to generation 4; vdb alone (vda
	// missing) to generation 3.
	a := asmNext(asmNext(g2[:1], func(sb *Superblock) { sb.Roles[1].State = RoleMissing }), nil)[0]
	b := asmNext(g2[1:], func(sb *Superblock) { sb.Roles[0].State = RoleMissing })[0]
	_, err := Assemble(asmInputs(t, a, b, sbs[2]))
	asmWantErr(t, err, ErrSplitBrain, "/dev/vda (events 4) and /dev/vdb (events 3)")
}

// X, Y, Z: Y is removed (X and Z record it missing), X fails (Z records
// it), Y is re-added and rebuilt by Z, Z fails (its last superblock, from
// the array, records it failed), W takes Z's role. X's table records Y
// missing while Y is in W's array, and W's records X failed: from X and W
// alone, a split brain. Z ran with X and then with Y, and its superblock
// recording itself failed was written by that array (it did not run on
// its own since): one history, and X is just stale. (Found by the array
// model: a 3-way mirror refused as a split brain after a power cut.)
func TestAssembleBridgedByMemberRecordedFailed(t *testing.T) {
	sbs := asmNewArray(t, 1, 0, 3, 0)
	g := asmNext(sbs, func(sb *Superblock) { sb.Roles[1].State = RoleMissing })
	xLast := g[0]
	g = asmNext(g, func(sb *Superblock) { sb.Roles[0].State = RoleFaulty })
	g = asmNext(g, func(sb *Superblock) { sb.Roles[1].State = RoleRebuilding })
	g = asmNext(g, func(sb *Superblock) { sb.Roles[1].State = RoleActive })
	g = asmNext(g, func(sb *Superblock) { sb.Roles[2].State = RoleFaulty })
	zLast := g[2]
	w := sbUUID(0x57)
	g = asmNext(g, func(sb *Superblock) { sb.Roles[2] = RoleEntry{State: RoleRebuilding, Member: w} })
	g = asmNext(g, func(sb *Superblock) { sb.Roles[2].State = RoleActive })
	wsb := *g[1]
	wsb.Role, wsb.MemberUUID = 2, w
	_, err := Assemble(asmInputs(t, xLast, &wsb, g[1]))
	asmWantErr(t, err, ErrSplitBrain, "/dev/vda (events 2) and /dev/vdb (events 8)")
	a := mustAssemble(t, asmInputs(t, xLast, &wsb, g[1], zLast))
	asmWantRoles(t, a, "faulty /dev/vda", "active /dev/vdc", "active /dev/vdb")
	if !slices.Equal(a.Stale, []string{"/dev/vda", "/dev/vdd"}) {
		t.Errorf("stale %q", a.Stale)
	}
}

// Two tables of one generation from two runs: an update only /dev/vda took
// (it failed role 1; the last copy, role 2, never took it), then the array
// assembled from /dev/vdb and /dev/vdc alone, which wrote the same
// generation with role 0 missing. The first table names /dev/vdc active,
// which carries the other table: it is the older one, and /dev/vda is
// stale (found by the array model: 'members /m1 and /m0 disagree on the
// role table entry 0' refused the array). Input order does not matter.
func TestAssembleRefutedTable(t *testing.T) {
	gen2 := asmNext(asmNewArray(t, 10, 0x102, 3, 0), nil)
	held := asmNext(gen2[:1], func(sb *Superblock) { sb.Roles[1].State = RoleFaulty })
	run := asmNext(gen2[1:], func(sb *Superblock) { sb.Roles[0].State = RoleMissing })
	a := mustAssemble(t, asmInputs(t, held[0], run[0], run[1]))
	asmWantRoles(t, a, "missing ~/dev/vda", "active /dev/vdb", "active /dev/vdc")
	if !slices.Equal(a.Stale, []string{"/dev/vda"}) || a.Events != 3 {
		t.Errorf("stale %q, events %d", a.Stale, a.Events)
	}
	ms := asmInputs(t, run[1], held[0], run[0])
	ms[0].Path, ms[1].Path, ms[2].Path = "/dev/vdc", "/dev/vda", "/dev/vdb"
	a = mustAssemble(t, ms)
	asmWantRoles(t, a, "missing ~/dev/vda", "active /dev/vdb", "active /dev/vdc")
}

// TestAssembleForceSplitBrainSameEvents: both sides of a split brain ran
// as many generations (each started alone once: the common case), so two
// role tables of the freshest generation disagree. The refusal tells the
// user to add --force to keep the first side given; forced, that side is
// kept and the other rebuilt in full, not refused as an inconsistent array.
func TestAssembleForceSplitBrainSameEvents(t *testing.T) {
	a, b := splitSides(t, 2, 2, RoleMissing)
	ms := asmInputs(t, a, b)
	asmWantErr(t, mustFail(Assemble(ms)), ErrSplitBrain, "--force")
	x, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatalf("forced: %v", err)
	}
	asmWantRoles(t, x, "active /dev/vda", "rebuilding /dev/vdb@0")
	if x.Roles[0].Forced || !x.Roles[1].Forced || x.Freshest.Roles[1].State != RoleMissing {
		t.Errorf("forced %v %v, freshest table %+v", x.Roles[0].Forced, x.Roles[1].Forced, x.Freshest.Roles[:2])
	}
	// The other order keeps the other side.
	x, err = AssembleWith(asmInputs(t, b, a), AssembleOptions{Force: true})
	if err != nil {
		t.Fatalf("forced, other order: %v", err)
	}
	if !x.Roles[0].Forced || x.Roles[1].Forced || x.Roles[1].State != RoleActive {
		t.Errorf("forced, other order: %+v", x.Roles)
	}
}

func mustFail(_ *Assembly, err error) error { return err }

// TestAssembleForceKeepsInSyncOverSelfFailed: raid1 vda, vdb; vda is
// failed by hand (its own superblock, written then, records that, at the
// generation the survivor has) and writes reach vdb only; power cut.
// Given in that order with --force (which also overwrites signatures),
// the authority must be vdb, in sync by its own table: vda, recorded
// failed by both, is put back for a full rebuild, not trusted active
// beside vdb with its data from before the failure.
func TestAssembleForceKeepsInSyncOverSelfFailed(t *testing.T) {
	g := asmNext(asmNewArray(t, 1, 0, 2, 0), func(sb *Superblock) { sb.Roles[0].State = RoleFaulty })
	ms := asmInputs(t, g[0], g[1])
	asmWantRoles(t, mustAssemble(t, ms), "faulty /dev/vda", "active /dev/vdb")
	a, err := AssembleWith(ms, AssembleOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	asmWantRoles(t, a, "rebuilding /dev/vda@0", "active /dev/vdb")
	if !a.Roles[0].Forced || a.Roles[1].Forced {
		t.Errorf("forced %v %v", a.Roles[0].Forced, a.Roles[1].Forced)
	}
}
