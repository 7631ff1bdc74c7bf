package daemon

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// The restart's assembly (restore: the state file's paths, SkipAbsent,
// the entry's UUID) of an array changed while the daemon was down: role
// 1's member was replaced by p2 (in sync, recorded active in p0's
// superblock), which the state file does not list; p1, the old member,
// still is. The freshest superblock records role 1 active on a member
// that is not there, so (as for an absent path, CreateSpec.SkipAbsent)
// the assembly must refuse rather than start degraded and leave the
// in-sync p2 stale.
func TestRestoreWithoutRecordedMemberStaysPending(t *testing.T) {
	const size = 8 << 20
	paths := files(t, 3, size)
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.ReplaceMember(1, paths[2], false); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if st := a.Status(); st.Members[1].Path != paths[2] || st.Members[1].State != "active" {
		t.Fatalf("after the replace: %+v", st.Members)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	before := hashes(t, paths...)
	// The daemon's restart, from the state file's entry (paths[:2]).
	m := NewManager(nil, ManagerOptions{})
	b, err := openRetry(paths[:2], m.restoreSpec(StateEntry{Number: 0, UUID: uuid, Members: paths[:2]}))
	if err == nil {
		st := b.Status()
		b.SetClean(false) // what m.start does next
		b.Close()
		t.Errorf("restore of %v while role 1 is held by %s (in sync, not in the state file): started, state %s, members %+v", paths[:2], paths[2], st.State, st.Members)
		sameHashes(t, "in-sync replacement", map[string][32]byte{paths[2]: before[paths[2]]}, hashes(t, paths[2]))
	}
}
