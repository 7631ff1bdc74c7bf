package array

import (
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. A spare's activation is one superblock update: the
// survivors' tables put the spare in the failed member's role, and the
// spare's own superblock takes that role. A power cut that lets the
// survivors take it and not the spare (a torn update) left the spare
// stale at the next assembly, closed, and refused by re-add ("not a
// member"): an operator had to notice and replace. Its own superblock
// still says spare, and its data is not trusted either way: it is a
// spare again, and the start rebuilds the role onto it.
func TestTornSpareActivationSpareAgain(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// Role 1 failed and the spare took it: the update reached the
	// survivor only. The failed member is gone.
	sp := superblockOf(t, paths[2])
	torn := *superblockOf(t, paths[0])
	torn.Events++
	torn.Clean = false
	torn.Roles[1] = engine.RoleEntry{State: engine.RoleRebuilding, Member: sp.MemberUUID}
	for i := int(torn.Members); i < engine.RoleTableSize; i++ {
		if torn.Roles[i].Member == sp.MemberUUID {
			torn.Roles[i] = engine.RoleEntry{}
		}
	}
	putSuperblock(t, paths[0], &torn)

	b, err := Open([]string{paths[0], paths[2]}, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !slices.Equal(b.Spares(), []string{paths[2]}) {
		t.Fatalf("spares after the torn activation: %q; want %s (members: %+v)", b.Spares(), paths[2], b.Status().Members)
	}
	b.StartBackground()
	b.WaitSync()
	if st := b.Status(); st.ActiveDisks != 2 || st.Members[1].Path != paths[2] {
		t.Fatalf("after the start: %+v; want role 1 rebuilt onto %s", st.Members, paths[2])
	}
}
