package bitmap

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// Tests of events cleared (md's events_cleared, format version 2).

// orderChecker drives a bitmap's batches onto a fake array and checks, at
// each batch, that every region a data block turns from dirty to clean
// (on the members' disks) was cleared in a generation the headers already
// durable on every member cover (a batch's blocks are written in
// parallel, so a header in the same batch does not count).
type orderChecker struct {
	t       *testing.T
	b       *Bitmap
	a       *fakeArray
	headers []Header // every header written, in order
}

func (c *orderChecker) header(m int) Header {
	c.t.Helper()
	g := c.b.Geometry()
	h, err := DecodeHeader(c.a.areas[m][g.Start-g.AreaOffset:])
	if err != nil {
		c.t.Fatalf("member %d header: %v", m, err)
	}
	return h
}

func (c *orderChecker) commit(bt *Batch) {
	c.t.Helper()
	g := c.b.Geometry()
	for m := range c.a.areas {
		durable := c.header(m).EventsCleared
		for _, blk := range bt.Blocks {
			if blk.Index == 0 {
				continue
			}
			states, _, err := DecodeBlock(blk.Data, &g, blk.Index)
			if err != nil {
				c.t.Fatal(err)
			}
			first, _ := g.BlockRegions(blk.Index)
			for j, s := range states {
				if State(s) == Clean && c.a.diskState(c.t, &g, m, first+j) == Dirty && durable < c.b.Events() {
					c.t.Fatalf("region %d written clean in generation %d while member %d's header says events cleared %d",
						first+j, c.b.Events(), m, durable)
				}
			}
		}
	}
	for _, blk := range bt.Blocks {
		if blk.Index == 0 {
			h, err := DecodeHeader(blk.Data)
			if err != nil {
				c.t.Fatal(err)
			}
			c.headers = append(c.headers, h)
		}
	}
	var rel []Waiter
	c.a.commit(c.b, bt, &rel)
}

func (c *orderChecker) drain(bt *Batch) {
	for ; bt != nil; bt = c.b.Prepare() {
		c.commit(bt)
	}
}

func (c *orderChecker) tick(now time.Duration) { c.drain(c.b.Tick(now)) }

// write makes region r dirty on disk and ends the write at once.
func (c *orderChecker) write(r int) {
	if !c.b.StartWrite(r, r, Waiter(r)) {
		c.drain(c.b.Prepare())
	}
	c.b.EndWrite(r, r)
}

func blockIndices(bt *Batch) []int {
	var ix []int
	if bt != nil {
		for _, blk := range bt.Blocks {
			ix = append(ix, blk.Index)
		}
	}
	return ix
}

// TestEventsClearedDurableBeforeClear: the header saying events cleared G
// is on every member before any block that writes a region clean in
// generation G; it is written once per generation in which regions are
// cleared, and not at all in one where none is.
func TestEventsClearedDurableBeforeClear(t *testing.T) {
	const d = time.Second
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{ClearDelay: d, MaxClearDelay: d})
	c := &orderChecker{t: t, b: b, a: a}
	if h := c.header(0); h.Version != Version || h.Events != 1 || h.EventsCleared != 1 {
		t.Fatalf("new bitmap's header %+v, want version %d, events 1, events cleared 1", h, Version)
	}
	c.tick(0)
	c.write(5)
	c.write(2000)
	// A new generation: its header still says events cleared 1.
	b.SetEvents(2)
	c.drain(b.Prepare())
	c.tick(d / 4) // sees the writes
	if h := c.header(1); h.Events != 2 || h.EventsCleared != 1 || len(c.headers) != 1 {
		t.Fatalf("after SetEvents(2): header %+v, %d header writes", h, len(c.headers))
	}
	// Idle past the delay: the first tick writes the header, the next
	// clears.
	bt := b.Tick(2 * d)
	if b.State(5) != Dirty || b.EventsCleared() != 2 || !b.ClearBlocked() || bt == nil || len(bt.Blocks) != 1 || bt.Blocks[0].Index != 0 {
		t.Fatalf("first tick: region 5 %v, events cleared %d, blocked %v, batch blocks %v (want the header only)", b.State(5), b.EventsCleared(), b.ClearBlocked(), blockIndices(bt))
	}
	c.drain(bt)
	if h := c.header(0); h.EventsCleared != 2 {
		t.Fatalf("header after the first tick %+v", h)
	}
	c.tick(2*d + d/4)
	g := b.Geometry()
	for _, r := range []int{5, 2000} {
		if b.State(r) != Clean || a.diskState(t, &g, 0, r) != Clean || a.diskState(t, &g, 1, r) != Clean {
			t.Fatalf("region %d not cleared", r)
		}
	}
	if b.ClearBlocked() {
		t.Fatal("still blocked after the header committed")
	}
	// More clears in the same generation: no header write.
	n := len(c.headers)
	c.write(7)
	c.tick(3 * d)
	c.tick(4 * d)
	if b.State(7) != Clean || len(c.headers) != n {
		t.Fatalf("region 7 %v, %d header writes, want %d", b.State(7), len(c.headers), n)
	}
	// Generation 3 with nothing to clear: one header write (for the
	// generation), events cleared still 2.
	b.SetEvents(3)
	c.drain(b.Prepare())
	c.tick(5 * d)
	c.tick(6 * d)
	if h := c.header(0); h.Events != 3 || h.EventsCleared != 2 || len(c.headers) != n+1 {
		t.Fatalf("generation 3 without clears: header %+v, %d header writes, want %d", h, len(c.headers), n+1)
	}
	// A clean stop in generation 3: ClearIdle writes the header, then
	// clears.
	c.write(9)
	c.write(2900)
	bt = b.ClearIdle(7 * d)
	if b.State(9) != Dirty || !b.ClearBlocked() {
		t.Fatalf("ClearIdle cleared before the header: region 9 %v, blocked %v", b.State(9), b.ClearBlocked())
	}
	c.drain(bt)
	c.drain(b.ClearIdle(7 * d))
	if b.State(9) != Clean || b.State(2900) != Clean || b.ClearBlocked() {
		t.Fatalf("second ClearIdle: regions %v %v, blocked %v", b.State(9), b.State(2900), b.ClearBlocked())
	}
	if h := c.header(1); h.EventsCleared != 3 || len(c.headers) != n+2 {
		t.Fatalf("after the clean stop: header %+v, %d header writes, want %d", h, len(c.headers), n+2)
	}
	// Every header written carried events cleared not above its events,
	// never decreasing.
	for i, h := range c.headers {
		if h.EventsCleared > h.Events || i > 0 && h.EventsCleared < c.headers[i-1].EventsCleared {
			t.Fatalf("header write %d: %+v after %+v", i, h, c.headers[max(i-1, 0)])
		}
	}
	// Load continues from the newest.
	b2, info, err := a.load(t, 3)
	if err != nil || info.EventsCleared != 3 || b2.EventsCleared() != 3 {
		t.Fatalf("load: %v, info events cleared %d", err, info.EventsCleared)
	}
}

// TestEventsClearedWaitsForRewrite: a clear that needs a new header while
// a whole rewrite is under way (the header goes last) waits for the
// rewrite, and nothing deadlocks.
func TestEventsClearedWaitsForRewrite(t *testing.T) {
	const d = time.Second
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{ClearDelay: d, MaxClearDelay: d})
	c := &orderChecker{t: t, b: b, a: a}
	c.tick(0)
	c.write(5)
	c.tick(d / 4) // sees the write
	b.SetEvents(2)
	b.RewriteAll()
	// Tick before the rewrite's first batch: the clear wants the header,
	// which goes after the data blocks.
	c.tick(2 * d)
	c.tick(3 * d)
	if b.State(5) != Clean || c.header(0).EventsCleared != 2 {
		t.Fatalf("region 5 %v, header %+v", b.State(5), c.header(0))
	}
}

// v1 re-encodes b (a version 2 header block) as a version 1 header.
func v1(b []byte) []byte {
	h := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(h[hVersion:], VersionV1)
	clear(h[hEventsCleared:hEnd])
	binary.LittleEndian.PutUint32(h[hChecksum:], headerChecksum(h))
	return h
}

// TestHeaderV2RoundTripAndV1: version 2 headers keep events cleared;
// version 1 headers are read as cleared at their own events; anything
// else about the field is corrupt.
func TestHeaderV2RoundTripAndV1(t *testing.T) {
	cfg := testConfig(t, 5000, 4096)
	g, err := NewGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4096)
	EncodeHeader(b, &g, 9, 7)
	h, err := DecodeHeader(b)
	if err != nil || h.Version != 2 || h.Events != 9 || h.EventsCleared != 7 {
		t.Fatalf("v2: %+v, %v", h, err)
	}
	old := v1(b)
	h1, err := DecodeHeader(old)
	if err != nil || h1.Version != 1 || h1.Events != 9 || h1.EventsCleared != 9 {
		t.Fatalf("v1: %+v, %v", h1, err)
	}
	if h1.BlockSize != h.BlockSize || h1.Regions != h.Regions || h1.ArrayUUID != h.ArrayUUID {
		t.Fatalf("v1 decodes to %+v, v2 to %+v", h1, h)
	}
	reseal := func(c []byte) []byte {
		binary.LittleEndian.PutUint32(c[hChecksum:], headerChecksum(c))
		return c
	}
	bad := map[string][]byte{}
	c := append([]byte(nil), old...)
	c[hEventsCleared] = 1 // a version 1 header with the field set
	bad["reserved byte 84"] = reseal(c)
	c = append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(c[hEventsCleared:], 0)
	bad["events cleared 0"] = reseal(c)
	c = append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(c[hEventsCleared:], 10)
	bad["events cleared 10"] = reseal(c)
	c = append([]byte(nil), b...)
	c[hEnd] = 1
	bad["reserved byte 92"] = reseal(c)
	c = append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(c[hVersion:], 3)
	bad["unknown format version 3"] = reseal(c)
	for want, c := range bad {
		if _, err := DecodeHeader(c); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}

// TestLoadEventsCleared: Load takes the newest events cleared of the
// copies, reads version 1 copies as cleared at their events, rewrites them
// in version 2, and an unusable bitmap (a version it does not know: what
// a build that reads only version 1 does with a version 2 header) makes
// every region dirty with events cleared at its events.
func TestLoadEventsCleared(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 2, InitClean, Options{})
	b.SetEvents(5)
	a.flush(t, b)
	g := b.Geometry()
	hdr := func(m int) []byte { return a.areas[m][g.Start-g.AreaOffset : g.Start-g.AreaOffset+uint64(g.BlockSize)] }
	set := func(m int, cleared uint64) {
		EncodeHeader(hdr(m), &g, 5, cleared)
	}
	set(0, 2)
	set(1, 4)
	b2, info, err := a.load(t, 5)
	if err != nil || info.EventsCleared != 4 || b2.EventsCleared() != 4 {
		t.Fatalf("mixed copies: %v, events cleared %d", err, info.EventsCleared)
	}
	// Version 1 on one member: cleared at its events (5).
	copy(hdr(0), v1(hdr(0)))
	b3, info, err := a.load(t, 5)
	if err != nil || info.EventsCleared != 5 || b3.EventsCleared() != 5 {
		t.Fatalf("a version 1 copy: %v, events cleared %d", err, info.EventsCleared)
	}
	a.flush(t, b3)
	for m := range 2 {
		if h, err := DecodeHeader(hdr(m)); err != nil || h.Version != Version || h.EventsCleared != 5 {
			t.Fatalf("member %d after the first batches: %+v, %v", m, h, err)
		}
	}
	// A version this build does not know on every member.
	for m := range 2 {
		binary.LittleEndian.PutUint32(hdr(m)[hVersion:], Version+1)
		binary.LittleEndian.PutUint32(hdr(m)[hChecksum:], headerChecksum(hdr(m)))
	}
	cfg := a.cfg
	cfg.Events = 6
	b4, info, err := Assemble(cfg, a.areas, Options{})
	if err != nil || !info.AllDirty || !errors.Is(info.Err, ErrCorrupt) || b4.EventsCleared() != b4.Events() || len(b4.DirtyRegions(nil)) != g.Regions {
		t.Fatalf("unknown version: %v, %+v, events cleared %d", err, info, b4.EventsCleared())
	}
}
