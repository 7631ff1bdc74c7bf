package bitmap

import (
	"errors"
	"testing"
)

// Found by review. A header is written at most one generation ahead of
// the superblocks; one copy whose (checksummed) header claimed events far
// ahead raised the loaded bitmap's events there, and the array's next
// superblock update (events = the bitmap's + 1) jumped to them: near the
// maximum, the array could record no further failure. md never takes its
// events from the bitmap superblock. Such a copy is corrupt: not used,
// and its events are not the bitmap's.
func TestLoadHeaderFarAheadIsCorrupt(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{})
	b.StartWrite(1, 1, 1)
	a.flush(t, b)
	g := b.Geometry()
	ev := b.Events()
	// One update's header ahead is legitimate: used.
	EncodeHeader(a.areas[1][g.Start-g.AreaOffset:], &g, ev+1, b.EventsCleared())
	b2, info, err := a.load(t, ev)
	if err != nil || info.Copies[1].Err != nil || b2.Events() != ev+1 {
		t.Fatalf("header one ahead: %v, member 1 %v, events %d", err, info.Copies[1].Err, b2.Events())
	}
	EncodeHeader(a.areas[1][g.Start-g.AreaOffset:], &g, 1<<63, b.EventsCleared())
	b3, info, err := a.load(t, ev)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(info.Copies[1].Err, ErrCorrupt) {
		t.Errorf("member 1's header at events 2^63 (superblock %d): %v, want corrupt", ev, info.Copies[1].Err)
	}
	if info.Events > ev+1 || b3.Events() > ev+1 {
		t.Errorf("events %d (bitmap %d) from a header at 2^63; superblock %d", info.Events, b3.Events(), ev)
	}
}
