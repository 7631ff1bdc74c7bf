package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// TestRebuildLostBlockKeepsMembers (found by review): raid1 x3, role 2 replaced and
// rebuilt while the same 4 KiB block is a latent bad sector on both
// sources (roles 0 and 1). That block is lost whatever is done; md's
// fix_sync_read_error ("Cannot read from anywhere, this block is lost ...
// Don't fail devices as that won't really help") records it and fails
// no device. Here the rebuild's unreadable range failed role 0, which
// still holds the only good copy of everything else it shares with
// role 1 being the last: the array dropped to one in-sync member over one
// bad block.
func TestRebuildLostBlockKeepsMembers(t *testing.T) {
	paths := memberFiles(t, 4, 32<<20)
	bad := &badSectorRW{bad: map[Device][2]int64{}}
	memberRW = bad.rw // (before Open: its goroutines read it)
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths[:3], CreateSpec{Name: "s", Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	blk := int64(a.dataOffset + 1<<20)
	bad.mu.Lock()
	bad.bad[a.Members[0].Device] = [2]int64{blk, blk + 4096}
	bad.bad[a.Members[1].Device] = [2]int64{blk, blk + 4096}
	bad.mu.Unlock()
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(2, paths[3]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	st := a.Engine.State()
	for _, r := range []int{0, 1} {
		if st.Members[r].State != engine.MemberActive {
			t.Errorf("role %d is %v after a rebuild met one 4 KiB block unreadable on both sources (md fails neither)", r, st.Members[r].State)
		}
	}
	t.Logf("last: %s %s; read errors injected %d", a.SyncStatus().LastAction, a.SyncStatus().LastResult, bad.hits)
}
