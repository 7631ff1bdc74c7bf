package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

func reviewSparesSB(t *testing.T, path string) *engine.Superblock {
	t.Helper()
	sb, err := readSuperblock(path)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func reviewSparesWriteSB(t *testing.T, path string, sb *engine.Superblock) {
	t.Helper()
	b, err := sb.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
}

// Found by review. add-spare S to a raid1 of 3 whose role 2 is missing: S is written as a
// spare, the members' next generation X lists it, and S's activation
// writes generation X+1 to A, B and S at once (neither A nor B holds the
// last copy of anything, so they go in the same phase as S). A power cut
// lets only S's write through: S holds role 2 (rebuilding) at X+1, A and
// B list S as a spare at X. The daemon died with S in the entry's
// Joining list.
//
// Assembled from A, B and S, the array takes S in role 2 (the freshest,
// A and B within the slack) and rebuilds it. But restore's joined()
// answers "no" for S ("one ahead of them all ran elsewhere since"): S is
// silently dropped from the state entry, the array starts degraded with
// its role 2 missing and the device that was added never used, not even
// named in a log line.
func TestReviewSparesJoinedActivationAheadDropped(t *testing.T) {
	paths := files(t, 4, 8<<20) // A, B, C, S
	a, err := array.Open(paths[:3], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(2); err != nil {
		t.Fatal(err)
	}
	if err := a.AddSpare(paths[3]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if r := a.RoleOf(paths[3]); r != 2 {
		t.Fatalf("the spare took role %d, want 2", r)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()

	// The superblocks as the torn activation leaves them.
	s := reviewSparesSB(t, paths[3])
	x := s.Events + 10
	for _, p := range paths[:2] {
		sb := reviewSparesSB(t, p)
		sb.Events, sb.Clean, sb.ResyncOffset = x, false, 0
		sb.Roles[2] = engine.RoleEntry{State: engine.RoleMissing, Member: reviewSparesSB(t, paths[2]).MemberUUID}
		sb.Roles[3] = engine.RoleEntry{State: engine.RoleSpare, Member: s.MemberUUID}
		reviewSparesWriteSB(t, p, sb)
	}
	s.Events, s.Clean, s.ResyncOffset = x+1, false, 0
	s.Roles[2] = engine.RoleEntry{State: engine.RoleRebuilding, Member: s.MemberUUID}
	for i := 3; i < engine.RoleTableSize; i++ {
		s.Roles[i] = engine.RoleEntry{}
	}
	reviewSparesWriteSB(t, paths[3], s)

	// Control, on copies: assembly from A, B and S takes S in role 2.
	dir := t.TempDir()
	var copies []string
	for i, p := range []string{paths[0], paths[1], paths[3]} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		c := filepath.Join(dir, string(rune('a'+i)))
		if err := os.WriteFile(c, b, 0o600); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	ctl, err := array.Open(copies, array.CreateSpec{}, false)
	if err != nil {
		t.Fatalf("control assembly of A, B, S: %v", err)
	}
	r := ctl.RoleOf(copies[2])
	ctl.StopSync()
	ctl.Close()
	if r != 2 {
		t.Fatalf("control: the assembly of A, B, S put S in role %d, not 2", r)
	}

	state := filepath.Join(t.TempDir(), "arrays.json")
	entry := StateEntry{Number: 0, UUID: uuid, Members: slices.Clone(paths[:2]), Joining: []string{paths[3]}}
	if err := SaveState(state, State{Arrays: []StateEntry{entry}}); err != nil {
		t.Fatal(err)
	}
	fakeDevices(t)
	n := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := n.Restore()
	sv := n.arrays[0]
	if sv == nil {
		t.Fatalf("the array did not start: %d started, %d failed: %v", started, failed, err)
	}
	t.Cleanup(func() { sv.a.StopSync(); sv.a.Close() })
	after, _ := LoadState(state)
	if r := sv.a.RoleOf(paths[3]); r != 2 || !slices.Contains(after.Arrays[0].Members, paths[3]) {
		t.Fatalf("the spare whose activation reached only its own superblock (role 2 at events %d, the members at %d list it as a spare) was dropped: role %d in the array, state file members %v; array %+v",
			x+1, x, r, after.Arrays[0].Members, sv.a.Status().Members)
	}
}
