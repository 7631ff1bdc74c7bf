package array

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (bm): a re-add after an assembly whose first bitmap
// batch the last in-sync copy failed (kept) skips the regions the bitmap
// loaded dirty once the degraded resync has "synced" them: their
// durable-dirty flag was never set (the batch failed) and ResyncDone
// cleared their needs-sync flag, so Bitmap.Dirty says no, though the
// bitmap image (and every copy on disk) says dirty and the member missed
// their writes. The re-added member keeps stale data where the bitmap
// recorded the writes it missed.
func TestReviewbmReAddAfterFailedFirstBatch(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	spec := CreateSpec{Name: "t", Level: engine.Level1, AssumeClean: true, RegionSectors: testRegion}
	a := newRAID1(t, paths)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	failAndRemove(t, a, 1)
	userWrite(t, a, paths, 5<<20, 4096, 0x5b) // B misses it; its region stays dirty
	stop(t, a)

	// Run 2 without B; A's bitmap writes fail (A is kept: the last copy).
	var failing atomic.Bool
	old := writeBitmapBlock
	t.Cleanup(func() { writeBitmapBlock = old })
	writeBitmapBlock = func(m *Member, data []byte, off int64) error {
		if failing.Load() && m.Path == paths[0] {
			return errors.New("injected bitmap write error")
		}
		return old(m, data, off)
	}
	failing.Store(true)
	a = run(t, paths, spec)
	defer a.Close()
	if st := a.Engine.State().Members[1].State; st == engine.MemberActive {
		t.Fatalf("setup: B is %v", st)
	}
	r, _ := a.Bitmap.Regions(5<<20>>9, 8)
	if !a.Bitmap.Dirty(r) {
		t.Fatalf("setup: region %d not dirty after assembly", r)
	}
	a.StartBackground()
	a.WaitSync()
	t.Logf("before the re-add: region %d image %v, Dirty %v, NeedsSync %v; sync %+v", r, a.Bitmap.State(r), a.Bitmap.Dirty(r), a.Bitmap.NeedsSync(r), a.SyncStatus())
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	// (Once B is in sync, A's next failed bitmap write is no longer the
	// last copy's: A may be failed, leaving B alone to serve.)
	if st := a.Engine.State().Members[1].State; st != engine.MemberActive {
		t.Skipf("B is %v after the re-add: not put in sync", st)
	}
	if d1 := dataOf(t, a, paths[1]); !bytes.Equal(d1[5<<20:5<<20+4096], bytes.Repeat([]byte{0x5b}, 4096)) {
		t.Fatalf("re-added B is in sync but stale at 5 MiB: byte %#x, want 0x5b (region %d: image %v, Dirty %v; A is %v): the write it missed, which the bitmap recorded, was not copied",
			d1[5<<20], r, a.Bitmap.State(r), a.Bitmap.Dirty(r), a.Engine.State().Members[0].State)
	}
}
