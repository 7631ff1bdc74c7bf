package array

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A region is written clean only after every member holding the bitmap
// was flushed: the data writes of the region must be durable before a bit
// says the copies agree (md writes bitmap pages with PREFLUSH). It used to
// be written clean with the data possibly still in a member's cache.
func TestBitmapClearFlushesMembersFirst(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	first, last := a.Bitmap.Regions(0, 2048)
	if !a.Bitmap.StartWrite(first, last, 0) {
		a.fl.do(func() {})
		a.fl.do(func() {})
	}
	a.Bitmap.EndWrite(first, last)

	var mu sync.Mutex
	synced := map[string]bool{}
	var unflushed []string // members written a bitmap block before a flush
	oldSync, oldWrite := memberSync, writeBitmapBlock
	t.Cleanup(func() { memberSync, writeBitmapBlock = oldSync, oldWrite })
	memberSync = func(m *Member) error {
		mu.Lock()
		synced[m.Path] = true
		mu.Unlock()
		return oldSync(m)
	}
	writeBitmapBlock = func(m *Member, data []byte, off int64) error {
		mu.Lock()
		if !synced[m.Path] {
			unflushed = append(unflushed, m.Path)
		}
		mu.Unlock()
		return oldWrite(m, data, off)
	}
	// A clean stop clears every idle region.
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	if a.Bitmap.NeedsSync(first) || a.needsResync() {
		t.Fatal("region still dirty after a clean stop")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(synced) != 2 || len(unflushed) != 0 {
		t.Fatalf("bitmap cleared with members flushed %v, written before a flush %v", synced, unflushed)
	}
}

// A bitmap write given up after the member timeout keeps reading its
// data: that must stay the batch's it belonged to. It read the bitmap's
// own buffer, which later batches change (a data race; the late write
// then put a later batch's bits, which may say clean, on the member).
func TestLateBitmapWriteKeepsItsBatch(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = time.Second
	hung, release, landed := make(chan []byte, 1), make(chan struct{}), make(chan []byte, 1)
	var once sync.Once
	old := writeBitmapBlock
	t.Cleanup(func() { writeBitmapBlock = old })
	writeBitmapBlock = func(m *Member, data []byte, off int64) error {
		first := false
		if m.Path == paths[1] {
			once.Do(func() { first = true })
		}
		if first {
			hung <- bytes.Clone(data)
			<-release
			landed <- bytes.Clone(data)
		}
		return old(m, data, off)
	}
	dirty := func(sector uint64) {
		first, last := a.Bitmap.Regions(sector, 8)
		if !a.Bitmap.StartWrite(first, last, 0) {
			a.fl.do(func() {})
			a.fl.do(func() {})
		}
		a.Bitmap.EndWrite(first, last)
	}
	dirty(0) // member 1 hangs on this batch: given up, failed
	want := <-hung
	dirty(2048) // the next batch changes the same block
	dirty(4096)
	close(release)
	if got := <-landed; !bytes.Equal(got, want) {
		t.Fatal("the late bitmap write carried another batch's data")
	}
}

// A bitmap batch the last in-sync copy failed does not make its regions
// durable-dirty: that member is kept, its copy lacks the bits, and a crash
// could leave it the only copy trusted. The writes waiting for the batch
// fail unissued (their tokens are routed as failures), and once the member
// takes bitmap writes again the region's next write makes it dirty.
func TestBitmapWriteFailedOnLastCopy(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil { // role 0 holds the last copy
		t.Fatal(err)
	}
	var failing atomic.Bool
	failing.Store(true)
	old := writeBitmapBlock
	t.Cleanup(func() { writeBitmapBlock = old })
	writeBitmapBlock = func(m *Member, data []byte, off int64) error {
		if failing.Load() && m.Path == paths[0] {
			return errors.New("injected bitmap write error")
		}
		return old(m, data, off)
	}
	first, last := a.Bitmap.Regions(0, 8)
	if a.Bitmap.StartWrite(first, last, 0) {
		t.Fatal("a write to a clean region did not wait")
	}
	a.fl.do(func() {}) // the batch was written (and failed) before this runs
	a.Bitmap.EndWrite(first, last)
	if st := a.Engine.State().Members[0].State; st != engine.MemberActive {
		t.Fatalf("the last copy is %v after a bitmap write error", st)
	}
	if a.Bitmap.StartWrite(first, last, 1) {
		t.Fatal("the region is durable-dirty though the last in-sync copy failed the bitmap write")
	}
	failing.Store(false)
	a.Bitmap.EndWrite(first, last) // (the waiting write is failed too: the member failed the retry or not)
	waitFor(t, "the region durable-dirty once the member takes bitmap writes", func() bool {
		ok := a.Bitmap.StartWrite(first, last, 2)
		a.Bitmap.EndWrite(first, last)
		if !ok {
			a.fl.do(func() {})
		}
		return ok
	})
}
