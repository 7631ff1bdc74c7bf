package array

import (
	"sync"
	"testing"

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
