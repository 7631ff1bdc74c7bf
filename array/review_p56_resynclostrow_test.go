package array

import (
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. The resync of an unclean raid5's dirty regions meets a 4 KiB row that
// two members cannot read (latent bad sectors on roles 1 and 2, the same
// row of one stripe in a dirty region): more than the parity covers, so
// the row is lost whatever is done. README ("Resumable, and nothing
// dropped"): "A block that no copy can be read from fails no member (md:
// 'Don't fail devices as that won't really help') ... the rebuild,
// resync or check stops at it". md's handle_stripe sees failed >
// max_degraded and calls handle_failed_sync, which fails nobody. Here
// role 1 is failed: a healthy raid5 is left degraded by one bad row, and
// every other bad sector on the members left is then a loss too.
func TestReviewP56ResyncLostRowFailsNoMember(t *testing.T) {
	setRW := hookRW(t) // (before Open: its repair worker takes memberRW)
	rng := rand.New(rand.NewSource(7))
	const span = 4096
	a, paths, h, r, ref, id := parityGarbageArray(t, rng, engine.Level5, 4, span)
	pWhileSync(t, rng, a, h, r, ref, span, id)
	g := *a.Engine.Parity
	rs := a.Bitmap.Geometry().RegionSectors
	per := g.ChunkSectors * uint64(g.DataMembers())
	// Regions 2-3 dirty at the crash (a write in flight there).
	for !a.Bitmap.StartWrite(2, 3, 0) {
		a.fl.do(func() {})
	}
	a.fl.do(func() {})
	persistLogCheckpoint(t, a)
	a.Close() // the crash: not stopped cleanly
	a, err := Open(paths, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.Bitmap.NeedsSync(2) {
		t.Fatal("region 2 does not need sync after the crash")
	}
	// A stripe wholly in region 2; the same bad 4 KiB row on roles 1 and 2.
	s := (2*rs + per - 1) / per
	row := int64(a.dataOffset + (s*g.ChunkSectors)<<9)
	bad := &badSectorRW{bad: map[Device][2]int64{
		a.Members[1].Device: {row, row + 4096},
		a.Members[2].Device: {row, row + 4096},
	}}
	setRW(bad.rw)
	a.StartBackground()
	a.WaitSync()
	st := a.Engine.State()
	t.Logf("after the resync: %+v; members %v; read errors injected %d", a.SyncStatus(), st.Members, bad.hits)
	for i, m := range st.Members {
		if m.State != engine.MemberActive {
			t.Errorf("role %d is %v after the resync met one row unreadable on roles 1 and 2 (README: a block no copy can be read from fails no member; md fails neither)", i, m.State)
		}
	}
}
