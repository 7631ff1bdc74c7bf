package array

import (
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. A bitmap header on one member whose events were far
// ahead of the superblocks' (a corrupt but checksummed header: a header
// is at most one generation ahead) moved the array's generation counter
// there: the next superblock write jumped to the header's events+1, and
// the array could then record no member failure. md never takes
// mddev->events from the bitmap superblock.
func TestBitmapHeaderFarAheadKeepsEvents(t *testing.T) {
	paths := memberFiles(t, 2, 64<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if a.Bitmap == nil {
		t.Fatal("no bitmap")
	}
	sb := *a.SBs[1]
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	sbEvents := sb.Events + 1 // (the clean mark)

	// Rewrite member 1's header with events near the maximum.
	f, err := os.OpenFile(paths[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	area := make([]byte, min(sb.BitmapBytes, bitmap.MaxCopyBytes))
	if _, err := f.ReadAt(area, int64(sb.BitmapOffset)); err != nil {
		t.Fatal(err)
	}
	h, err := bitmap.DecodeHeader(area)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Geometry(sb.BitmapOffset, sb.BitmapBytes)
	if err != nil {
		t.Fatal(err)
	}
	blk := make([]byte, g.BlockSize)
	bad := uint64(engine.MaxEvents - 1)
	bitmap.EncodeHeader(blk, &g, bad, h.EventsCleared)
	if _, err := f.WriteAt(blk, int64(g.Start)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Logf("assembly refused: %v", err)
		return // a refusal is acceptable
	}
	defer b.Close()
	if err := b.SetClean(false); err != nil {
		t.Fatalf("first superblock update: %v", err)
	}
	if got := b.SBs[0].Events; got > sbEvents+2 {
		t.Errorf("superblock events jumped from %d to %d on one member's bitmap header (events %d)", sbEvents, got, bad)
	}
	if err := b.Fail(1); err != nil {
		t.Errorf("failing a redundant member after the header was trusted: %v", err)
	}
}
