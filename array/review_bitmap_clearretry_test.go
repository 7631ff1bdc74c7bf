package array

import (
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. README "Bits clear only over durable data. Each member
// is flushed before a bitmap batch that writes regions clean (md writes
// bitmap pages with PREFLUSH)". A clear batch whose flush fails on the
// member kept as the last copy (its partner failed meanwhile) is Failed:
// its blocks, still saying the region clean, are marked changed and go out
// again with the next batch. That next batch is prepared by the flusher's
// generic Prepare loop (here after the generation request of the partner's
// failure), which commits with clears=false: the block saying the region
// clean reaches the kept member with no flush at all, though its only
// flush since the region's data writes failed. A power cut then leaves the
// region clean over data that never reached that member's media.
func TestReviewBitmapClearRetriedWithoutFlush(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	defer a.Close()
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	// A first clear of this generation, so the next clear is one batch.
	userWrite(t, a, paths, 2<<20, 4096, 0x11)
	a.fl.do(a.fl.clearIdle)
	const X = 5 << 20
	userWrite(t, a, paths, X, 4096, 0x5b)
	rx, _ := a.Bitmap.Regions(X>>9, 8)
	if !a.Bitmap.Dirty(rx) {
		t.Fatal("written region not dirty")
	}
	g := a.Bitmap.Geometry()
	blk := g.BlockOf(rx)
	first, _ := g.BlockRegions(blk)

	kDev := a.Members[1] // K: kept as the last copy once role 0 fails

	var mu sync.Mutex
	flushFailed := false // K's flush failed and no flush of K succeeded since
	var violation string
	var armed sync.Once
	inFlush, release := make(chan struct{}), make(chan struct{})

	origSync := memberSync
	t.Cleanup(func() { memberSync = origSync })
	memberSync = func(m *Member) error {
		if m == kDev {
			fail := false
			armed.Do(func() {
				close(inFlush)
				<-release
				fail = true
			})
			if fail {
				mu.Lock()
				flushFailed = true
				mu.Unlock()
				return unix.EIO
			}
			err := origSync(m)
			if err == nil {
				mu.Lock()
				flushFailed = false
				mu.Unlock()
			}
			return err
		}
		return origSync(m)
	}
	origWrite := writeBitmapBlock
	t.Cleanup(func() { writeBitmapBlock = origWrite })
	writeBitmapBlock = func(m *Member, data []byte, off int64) error {
		if m == kDev && uint64(off) == g.BlockOffset(blk) {
			if states, _, err := bitmap.DecodeBlock(data, &g, blk); err == nil && bitmap.State(states[rx-first]) == bitmap.Clean {
				mu.Lock()
				if flushFailed && violation == "" {
					violation = "written"
				}
				mu.Unlock()
			}
		}
		return origWrite(m, data, off)
	}

	clearDone := make(chan struct{})
	go func() { a.fl.do(a.fl.clearIdle); close(clearDone) }()
	<-inFlush // the clear's batch is out: K's flush is held
	failDone := make(chan error, 1)
	go func() { failDone <- a.Fail(0) }()
	// Until the partner's failure is in the engine (K is then the last copy).
	deadline := time.Now().Add(10 * time.Second)
	for a.Engine.State().Members[0].State != engine.MemberFaulty {
		if time.Now().After(deadline) {
			t.Fatal("role 0 never failed")
		}
		time.Sleep(time.Millisecond)
	}
	close(release) // K's flush fails: K is kept, the clear batch Failed
	<-clearDone
	if err := <-failDone; err != nil {
		t.Fatal(err)
	}
	a.fl.do(func() {}) // whatever the flusher had left is out
	if st := a.Engine.State().Members[1].State; st != engine.MemberActive {
		t.Fatalf("K after its failed flush: %s (expected kept as the last copy)", st)
	}
	mu.Lock()
	v, lost := violation, flushFailed
	mu.Unlock()
	memberSync, writeBitmapBlock = origSync, origWrite

	// The consequence: a power cut now loses what K held in its cache
	// (its flush failed), while its bitmap copy says the region clean.
	// Role 0 comes back by re-add from the bitmap: the clean region is
	// not copied, and the two copies differ where the bitmap says clean.
	cut := powerCutCopy(t, paths)
	if lost {
		// No flush of K succeeded since the write: its cache is lost
		// (the region held zeroes before).
		scribble(t, a, cut[1], X, 4096, 0x00)
	}
	b, err := Open(cut, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.StartBackground()
	b.WaitSync()
	reAddErr := b.ReAdd(cut[0])
	b.WaitSync()
	d0, d1 := dataOf(t, b, cut[0]), dataOf(t, b, cut[1])
	differ := reAddErr == nil && b.Engine.State().Members[0].State == engine.MemberActive && d0[X] != d1[X]
	t.Logf("after the cut: re-add %v; region %d %v; byte at %d: role 0 %#x, role 1 %#x", reAddErr, rx, b.Bitmap.State(rx), X, d0[X], d1[X])
	if v != "" {
		t.Fatalf("bitmap block saying region %d clean was written to role 1 (the kept last copy) with no flush of it since its flush failed: bits cleared over data not durable (after a power cut and a re-add, copies differ in the clean region: %v)", rx, differ)
	}
	if differ {
		t.Fatalf("copies differ in clean region %d after a power cut and a re-add", rx)
	}
}
