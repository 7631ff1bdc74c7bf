package array

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// followsMembers fails unless the spare at path holds the generation of
// the member at member: its events, clean state and role table, with the
// spare role and its own member UUID (uuid).
func followsMembers(t *testing.T, what, path, member string, uuid [16]byte) {
	t.Helper()
	sp, m := superblockOf(t, path), superblockOf(t, member)
	switch {
	case sp.Role != engine.SpareRole || sp.MemberUUID != uuid:
		t.Fatalf("%s: spare %s has role %d, member %s; want the spare role, %s", what, path, sp.Role,
			engine.UUIDString(sp.MemberUUID), engine.UUIDString(uuid))
	case sp.Events != m.Events || sp.Clean != m.Clean || sp.Roles != m.Roles:
		t.Fatalf("%s: spare %s holds events %d, clean %v; the members %d, clean %v (role tables equal: %v)",
			what, path, sp.Events, sp.Clean, m.Events, m.Clean, sp.Roles == m.Roles)
	case !listsSpare(sp, uuid):
		t.Fatalf("%s: spare %s's role table does not list it", what, path)
	}
}

// A spare's superblock follows the array, as md's md_update_sb writes
// every device that is not faulty, spares included: after marks in use
// and clean, another spare added, one removed and a grow, `examine` of
// the spare shows the array's events, state and table. It used to be
// written once, when the spare was added, and kept that generation.
func TestSpareSuperblockFollowsArray(t *testing.T) {
	paths := memberFiles(t, 5, 16<<20)
	growFiles(t, paths[2:], 40<<20) // spares large enough for the grow
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 128, Spares: paths[2:4]}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := superblockOf(t, paths[2]).MemberUUID
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	followsMembers(t, "in use", paths[2], paths[0], uuid)
	if err := a.RemoveSpare(paths[3]); err != nil {
		t.Fatal(err)
	}
	followsMembers(t, "another spare removed", paths[2], paths[0], uuid)
	if err := a.AddSpare(paths[4]); err != nil {
		t.Fatal(err)
	}
	followsMembers(t, "another spare added", paths[2], paths[0], uuid)
	followsMembers(t, "added", paths[4], paths[0], superblockOf(t, paths[4]).MemberUUID)
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	followsMembers(t, "clean", paths[2], paths[0], uuid)
	a.Close()

	growFiles(t, paths[:2], 40<<20)
	if a, err = Open([]string{paths[0], paths[1], paths[2], paths[4]}, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.Spares(); !slices.Equal(got, []string{paths[2], paths[4]}) {
		t.Fatalf("spares after assembly: %v", got)
	}
	if _, err := a.Grow(0); err != nil {
		t.Fatal(err)
	}
	followsMembers(t, "grown", paths[2], paths[0], uuid)
	if sp, m := superblockOf(t, paths[2]), superblockOf(t, paths[0]); sp.DataSectors < m.DataSectors {
		t.Fatalf("grown: the spare records %d data sectors, less than the members' %d", sp.DataSectors, m.DataSectors)
	}
}

// A spare whose superblock write fails is dropped from the array's
// spares and released, and the members' next generation stops listing
// it (md fails such a spare, then removes it); the update stands (a
// spare holds no data: the members took it).
func TestSpareSuperblockWriteFailureDropsSpare(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	bad := superblockOf(t, paths[3]).MemberUUID
	good := superblockOf(t, paths[2]).MemberUUID
	dropped := make(chan string, 1)
	a.OnSpareDropped = func(path string, err error) { dropped <- path }
	orig := writeSuperblock
	t.Cleanup(func() { writeSuperblock = orig })
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == paths[3] {
			return errors.New("write: I/O error")
		}
		return orig(m, b)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatalf("a spare's failed superblock write failed the update: %v", err)
	}
	if got := a.Spares(); !slices.Equal(got, paths[2:3]) {
		t.Fatalf("spares after %s's superblock write failed: %v", paths[3], got)
	}
	if p := <-dropped; p != paths[3] {
		t.Fatalf("OnSpareDropped told of %s", p)
	}
	m := superblockOf(t, paths[0])
	if listsSpare(m, bad) || !listsSpare(m, good) {
		t.Fatalf("members' table after the drop: lists %s %v, %s %v", paths[3], listsSpare(m, bad), paths[2], listsSpare(m, good))
	}
	followsMembers(t, "after the drop", paths[2], paths[0], good)
	if heldOpen(t, paths[3]) {
		t.Fatalf("%s still held open after it was dropped", paths[3])
	}
	if a.Engine.State().Members[0].State != engine.MemberActive || a.Engine.State().Members[1].State != engine.MemberActive {
		t.Fatalf("members after a spare's failure: %+v", a.Engine.State().Members)
	}
}

// A power cut at any point of the superblock updates (marks in use and
// clean) leaves devices that assemble: the spare is a spare, the array
// is at the members' generation, and clean only if a member's own
// superblock says so. The spares take a generation after the members:
// written first, a spare alone could carry a clean mark no member took,
// and (given first) assembly would take its word and skip the resync.
func TestSpareSuperblockPowerCut(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	var cuts [][]string
	var mu sync.Mutex
	orig := writeSuperblock
	t.Cleanup(func() { writeSuperblock = orig })
	writeSuperblock = func(m *Member, b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		cuts = append(cuts, powerCutCopy(t, paths))
		return orig(m, b)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	writeSuperblock = orig
	a.Close()
	cuts = append(cuts, powerCutCopy(t, paths))
	if len(cuts) != 7 { // 2 generations of 3 superblocks, and the end
		t.Fatalf("%d superblock writes, want 6", len(cuts)-1)
	}
	for i, c := range cuts {
		in := []string{c[2], c[0], c[1]} // the spare first: assembly must not take its word
		var ms []engine.MemberSB
		var top *engine.Superblock
		for _, p := range in {
			sb := superblockOf(t, p)
			ms = append(ms, engine.MemberSB{Path: p, SB: sb})
			if !sb.IsSpare() && (top == nil || sb.Events > top.Events) {
				top = sb
			}
		}
		asm, err := engine.Assemble(ms)
		if err != nil {
			t.Fatalf("cut %d: %v", i, err)
		}
		if asm.Events != top.Events || asm.Clean != top.Clean || asm.Freshest.IsSpare() {
			t.Fatalf("cut %d: assembled at events %d, clean %v (from a spare: %v); the members' freshest: %d, clean %v",
				i, asm.Events, asm.Clean, asm.Freshest.IsSpare(), top.Events, top.Clean)
		}
		b, err := Open(in, CreateSpec{}, false)
		if err != nil {
			t.Fatalf("cut %d: %v", i, err)
		}
		sp := b.Spares()
		b.Close()
		if !slices.Equal(sp, c[2:]) {
			t.Fatalf("cut %d: spares %v, want %v", i, sp, c[2:])
		}
	}
}

// An added spare that cannot take the generation that lists it is
// dropped at once: the add fails, and the members' tables do not list it.
func TestAddSpareSuperblockWriteFailureFails(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	orig := writeSuperblock
	t.Cleanup(func() { writeSuperblock = orig })
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == paths[2] {
			return errors.New("write: I/O error")
		}
		return orig(m, b)
	}
	if err := a.AddSpare(paths[2]); err == nil {
		t.Fatalf("add of a spare that took no generation: no error")
	}
	if sp := a.Spares(); len(sp) != 0 {
		t.Fatalf("spares: %v", sp)
	}
	uuid := superblockOf(t, paths[2]).MemberUUID
	if listsSpare(superblockOf(t, paths[0]), uuid) {
		t.Fatalf("the members' table lists the dropped spare")
	}
	if heldOpen(t, paths[2]) {
		t.Fatalf("%s still held open", paths[2])
	}
}
