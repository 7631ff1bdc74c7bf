package bitmap

import "time"

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

var testUUID = [16]byte{0x5e, 0x1f, 0x00, 0x01, 0x02, 0x03, 0x44, 0x05, 0x86, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d}

// testConfig is a bitmap of regions regions of the minimum size, in blocks
// of bs bytes, in an area at 8192 just big enough.
func testConfig(t tb, regions, bs int) Config {
	t.Helper()
	cfg := Config{
		ArrayUUID:     testUUID,
		ArraySectors:  uint64(regions) * MinRegionSectors,
		RegionSectors: MinRegionSectors,
		BlockSize:     bs,
		AreaOffset:    8192,
		Events:        1,
	}
	n, err := AreaBytesFor(cfg)
	if err != nil {
		t.Fatalf("AreaBytesFor: %v", err)
	}
	cfg.AreaBytes = n
	return cfg
}

// fakeArray is members' reserved areas, written by batches.
type fakeArray struct {
	cfg   Config
	areas [][]byte
}

func newFakeArray(cfg Config, members int) *fakeArray {
	a := &fakeArray{cfg: cfg, areas: make([][]byte, members)}
	for i := range a.areas {
		a.areas[i] = make([]byte, cfg.AreaBytes)
	}
	return a
}

// write applies block blk of a batch to member m.
func (a *fakeArray) write(m int, blk Block) {
	copy(a.areas[m][blk.Offset-a.cfg.AreaOffset:], blk.Data)
}

// flush prepares, writes to every member and commits batches until there
// is nothing left to write, and returns the released tokens.
func (a *fakeArray) flush(t tb, b *Bitmap) []Waiter {
	t.Helper()
	var rel []Waiter
	for range 100 {
		bt := b.Prepare()
		if bt == nil {
			return rel
		}
		a.commit(b, bt, &rel)
	}
	t.Fatalf("flush: still batches after 100")
	return nil
}

// commit writes bt to every member and commits it.
func (a *fakeArray) commit(b *Bitmap, bt *Batch, rel *[]Waiter) {
	for m := range a.areas {
		for _, blk := range bt.Blocks {
			a.write(m, blk)
		}
	}
	*rel = b.Committed(bt, *rel)
}

// tick runs Tick at now and writes its batches.
func (a *fakeArray) tick(t tb, b *Bitmap, now time.Duration) []Waiter {
	t.Helper()
	var rel []Waiter
	if bt := b.Tick(now); bt != nil {
		a.commit(b, bt, &rel)
	}
	return append(rel, a.flush(t, b)...)
}

// load loads from every member's area.
func (a *fakeArray) load(t tb, events uint64) (*Bitmap, *LoadInfo, error) {
	cfg := a.cfg
	cfg.Events = events
	return Load(cfg, a.areas, Options{})
}

// newTestBitmap creates a bitmap on a fake array and writes its first
// batches.
func newTestBitmap(t tb, regions, bs, members int, init InitialState, opts Options) (*Bitmap, *fakeArray) {
	t.Helper()
	cfg := testConfig(t, regions, bs)
	b, err := Create(cfg, init, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	a := newFakeArray(cfg, members)
	a.flush(t, b)
	return b, a
}

// diskState decodes region r's state from member m's area.
func (a *fakeArray) diskState(t tb, g *Geometry, m, r int) State {
	t.Helper()
	blk := g.BlockOf(r)
	states, _, err := DecodeBlock(a.areas[m][g.BlockOffset(blk)-g.AreaOffset:], g, blk)
	if err != nil {
		t.Fatalf("member %d: %v", m, err)
	}
	first, _ := g.BlockRegions(blk)
	return State(states[r-first])
}

func tokens(ws []Waiter) map[Waiter]bool {
	m := map[Waiter]bool{}
	for _, w := range ws {
		m[w] = true
	}
	return m
}
