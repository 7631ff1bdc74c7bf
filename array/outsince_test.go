package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// The superblocks record when a role went out: the first generation that
// records its member faulty is kept by every later one (a restart, the
// member's removal making the role missing), and a member taking the role
// clears it. Assembly tells a stale member from a split brain by it.
func TestSuperblockOutSince(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20) // A, B, S
	a := newRAID1(t, paths[:2])
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	before := superblockOf(t, paths[0]).Events
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	sb := superblockOf(t, paths[0])
	since := sb.Roles[1].OutSince
	if sb.Roles[1].State != engine.RoleFaulty || since <= before || since != sb.Events {
		t.Fatalf("after the failure (events %d before): role 1 %+v, events %d, want faulty since the generation that recorded it", before, sb.Roles[1], sb.Events)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	stop(t, a)
	b := run(t, paths[:1], CreateSpec{})
	sb = superblockOf(t, paths[0])
	if sb.Roles[1].State != engine.RoleMissing || sb.Roles[1].OutSince != since || sb.Events <= since+2 {
		t.Fatalf("generations later (events %d): role 1 %+v, want missing since %d", sb.Events, sb.Roles[1], since)
	}
	if err := b.Replace(1, paths[2]); err != nil {
		t.Fatal(err)
	}
	b.StartBackground()
	b.WaitSync()
	stop(t, b)
	sb = superblockOf(t, paths[0])
	if e := sb.Roles[1]; e.State != engine.RoleActive || e.OutSince != 0 || e.Member != superblockOf(t, paths[2]).MemberUUID {
		t.Fatalf("after the replacement: role 1 %+v", e)
	}
}
