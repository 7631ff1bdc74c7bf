package array

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/bitmap"
)

// Found by review: a bitmap batch the last in-sync copy (A) failed marks A
// missing for the bitmap (flusher.commit: SetMissing(r, true)), and A is
// kept active. Nothing marked it present again (SetMissing(false) is only
// at the end of a rebuild of that role, and A is never rebuilt): once B
// was re-added and rebuilt, with every member in sync and A taking bitmap
// writes again, no region was ever cleared in this run (the next start
// resynced them all, and a re-add copied them all). md clears its bits
// again once the array is whole. A kept member is now present again once
// it takes a batch.
func TestKeptMemberBitmapErrorClearsAgain(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	defer a.Close()
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	failAndRemove(t, a, 1) // A holds the last copy
	var failing atomic.Bool
	old := writeBitmapBlock
	t.Cleanup(func() { writeBitmapBlock = old })
	writeBitmapBlock = func(m *Member, data []byte, off int64) error {
		if failing.Load() && m.Path == paths[0] {
			return errors.New("injected transient bitmap write error")
		}
		return old(m, data, off)
	}
	failing.Store(true)
	first, last := a.Bitmap.Regions(3<<20>>9, 8)
	if !a.Bitmap.StartWrite(first, last, 0) {
		a.fl.do(func() {})
	}
	a.Bitmap.EndWrite(first, last)
	failing.Store(false)
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if st := a.Status(); st.ActiveDisks != 2 {
		t.Fatalf("after re-add: %+v", st)
	}
	userWrite(t, a, paths, 5<<20, 4096, 0x5b)
	a.fl.do(a.fl.clearIdle)
	a.fl.do(a.fl.clearIdle)
	r, _ := a.Bitmap.Regions(5<<20>>9, 8)
	if a.Bitmap.State(r) != bitmap.Clean {
		t.Fatalf("region %d is %s after clears with every member in sync and healthy: the bitmap still counts A missing", r, a.Bitmap.State(r))
	}
}
