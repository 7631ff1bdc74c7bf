package array

import (
	"math/rand"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// badSectorRW is a memberRW with latent bad sectors: a read of a device
// in bad that touches its byte range fails with EIO until a write covers
// it (a rewrite remaps the sector, as a disk does).
type badSectorRW struct {
	mu   sync.Mutex
	bad  map[Device][2]int64 // device -> [off, end) bytes
	hits int
}

func (b *badSectorRW) rw(d Device, p []byte, off int64, write bool) error {
	if p != nil {
		b.mu.Lock()
		r, ok := b.bad[d]
		if ok && off < r[1] && r[0] < off+int64(len(p)) {
			if write && off <= r[0] && r[1] <= off+int64(len(p)) {
				delete(b.bad, d)
			} else if !write {
				b.hits++
				b.mu.Unlock()
				return unix.EIO
			}
		}
		b.mu.Unlock()
	}
	return deviceRW(d, p, off, write)
}

// A check (and a repair) meeting a 4 KiB row that more members cannot
// read than the parity covers (two latent bad sectors in one row of a
// raid5: that row's data is lost whatever is done) leaves the row as it
// is and goes on to the end, failing no member (md's handle_failed_sync):
// each member still holds the only copy of everything else it stores,
// and failing one would make every other bad sector a loss too. The
// rows are reported (LostRows) and stay unreadable.
func TestParityCheckLostRowKeepsMembers(t *testing.T) {
	for _, repair := range []bool{false, true} {
		t.Run(map[bool]string{false: "check", true: "repair"}[repair], func(t *testing.T) {
			rng := rand.New(rand.NewSource(6))
			const span = 4096
			a, _, h, r, ref, id := parityGarbageArray(t, rng, engine.Level5, 4, span)
			defer func() { a.Close() }()
			pWhileSync(t, rng, a, h, r, ref, span, id)
			g := *a.Engine.Parity
			row := int64(a.dataOffset + (3*g.ChunkSectors)<<9)
			bad := &badSectorRW{bad: map[Device][2]int64{
				a.Members[1].Device: {row, row + 4096},
				a.Members[2].Device: {row, row + 4096},
			}}
			memberRW = bad.rw
			t.Cleanup(func() { memberRW = deviceRW })
			a.sync.s = resync.New(a.Engine, a.xbar, newMemberIO(a), resync.Config{})
			var lost uint64
			a.SetSyncLog(func(msg string, rep SyncReport, err error) {
				if msg == "sync ended" {
					lost = rep.LostRows
				}
			})
			if err := pDo(h, r, func() error { return a.Check(repair) }); err != nil {
				t.Fatal(err)
			}
			pWhileSync(t, rng, a, h, r, ref, span, id)
			for i, m := range a.Engine.State().Members {
				if m.State != engine.MemberActive {
					t.Errorf("role %d is %v after a check met a row unreadable on two members (md fails neither)", i, m.State)
				}
			}
			res := a.SyncStatus().LastCheckResult
			if lost != 1 || !strings.Contains(res, "1 4 KiB rows unreadable") {
				t.Errorf("lost rows %d (want 1); last check %q", lost, res)
			}
			if len(bad.bad) != 2 {
				t.Errorf("the lost row was written over (%d bad sectors left, want 2)", len(bad.bad))
			}
			t.Logf("read errors injected: %d; check: %s", bad.hits, res)
		})
	}
}

// A raid6 rebuild of one member meets a latent bad sector (one 4 KiB
// row) on another member, and another on a third member in another
// stripe. The parity covering them with the target, each row is
// rewritten from the others and read back (md's R5_ReadError, R5_ReWrite),
// the members stay, and the rebuild completes with every member in sync.
// (Each used to fail its whole member: the second then stopped the
// rebuild, leaving the array doubly degraded.)
func TestParityRebuildRewritesSourceReadErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	const span = 4096
	a, _, h, r, ref, id := parityGarbageArray(t, rng, engine.Level6, 5, span)
	defer func() { a.Close() }()
	pWhileSync(t, rng, a, h, r, ref, span, id)
	if err := pDo(h, r, func() error { return a.Fail(0) }); err != nil {
		t.Fatal(err)
	}
	if err := pDo(h, r, func() error { return a.Remove(0) }); err != nil {
		t.Fatal(err)
	}
	g := *a.Engine.Parity
	// A bad 4 KiB row on role 1 in stripe 2, one on role 2 in stripe 5.
	row := func(stripe uint64) int64 { return int64(a.dataOffset + (stripe*g.ChunkSectors)<<9) }
	bad := &badSectorRW{bad: map[Device][2]int64{
		a.Members[1].Device: {row(2), row(2) + 4096},
		a.Members[2].Device: {row(5), row(5) + 4096},
	}}
	memberRW = bad.rw
	t.Cleanup(func() { memberRW = deviceRW })
	a.sync.s = resync.New(a.Engine, a.xbar, newMemberIO(a), resync.Config{})
	fresh := memberFiles(t, 1, 16<<20)[0]
	if err := pDo(h, r, func() error { return a.Replace(0, fresh) }); err != nil {
		t.Fatal(err)
	}
	pWhileSync(t, rng, a, h, r, ref, span, id)
	st := a.Engine.State()
	for i, m := range st.Members {
		if m.State != engine.MemberActive {
			t.Errorf("role %d is %v after the rebuild (md rewrites a latent bad sector from the parity and keeps the member)", i, m.State)
		}
	}
	if s := a.SyncStatus(); s.LastResult != "ok" {
		t.Errorf("rebuild over two latent bad sectors on raid6: %s: %s", s.LastAction, s.LastResult)
	}
	t.Logf("read errors injected: %d; status %+v; log %v", bad.hits, a.SyncStatus(), a.Engine.State().Members)
	if len(bad.bad) != 0 {
		t.Errorf("bad sectors left unrewritten: %v", bad.bad)
	}
}
