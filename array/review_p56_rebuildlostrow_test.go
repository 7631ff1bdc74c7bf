package array

import (
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// Found by review. A raid6 rebuild of one member meets a 4 KiB row that two other members
// cannot read (latent bad sectors on roles 1 and 2, the same row of one
// stripe): with the target that is three chunks of the row lost, more
// than the parity covers, so that row's data is lost whatever is done
// and the rebuild stops there. README ("Resumable, and nothing
// dropped"): "A block that no copy can be read from fails no member (md:
// 'Don't fail devices as that won't really help')" -- md's
// handle_failed_sync aborts the recovery and fails nobody. Failing role 1
// leaves the raid6 doubly degraded (role 0 rebuilding, role 1 faulty) for
// one bad row: every other bad sector anywhere is then a loss too.
func TestReviewP56RebuildLostRowFailsNoMember(t *testing.T) {
	setRW := hookRW(t) // (before Open: its repair worker takes memberRW)
	rng := rand.New(rand.NewSource(5))
	const span = 4096
	a, _, h, r, _, _ := parityGarbageArray(t, rng, engine.Level6, 5, span)
	defer func() { a.Close() }()
	pDo(h, r, func() error { a.WaitSync(); return nil })
	if err := pDo(h, r, func() error { return a.Fail(0) }); err != nil {
		t.Fatal(err)
	}
	if err := pDo(h, r, func() error { return a.Remove(0) }); err != nil {
		t.Fatal(err)
	}
	g := *a.Engine.Parity
	// The same bad 4 KiB row on roles 1 and 2 in stripe 2.
	row := int64(a.dataOffset + (2*g.ChunkSectors)<<9)
	bad := &badSectorRW{bad: map[Device][2]int64{
		a.Members[1].Device: {row, row + 4096},
		a.Members[2].Device: {row, row + 4096},
	}}
	setRW(bad.rw)
	a.sync.s = resync.New(a.Engine, a.xbar, newMemberIO(a), resync.Config{})
	fresh := memberFiles(t, 1, 16<<20)[0]
	if err := pDo(h, r, func() error { return a.Replace(0, fresh) }); err != nil {
		t.Fatal(err)
	}
	pDo(h, r, func() error { a.WaitSync(); return nil })
	st := a.Engine.State()
	t.Logf("after the rebuild: %+v; members %v; read errors injected %d", a.SyncStatus(), st.Members, bad.hits)
	for i := 1; i < g.Members; i++ {
		if m := st.Members[i]; m.State != engine.MemberActive {
			t.Errorf("role %d is %v after the rebuild met one row unreadable on roles 1 and 2 (README: a block no copy can be read from fails no member; md fails neither)", i, m.State)
		}
	}
}
