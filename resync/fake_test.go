package resync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// memMembers is an in-memory Members: a volatile cache per member, made
// durable by Flush (a crash reverts to the durable images).
type memMembers struct {
	mu        sync.Mutex
	cache     [][]byte
	durable   [][]byte
	readDelay time.Duration // after every read: widens the window a missing barrier leaves open
	flushes   []int
	// failRead, failWrite, failFlush inject errors (nil: none).
	failRead  func(role int, sector, sectors uint64) error
	failWrite func(role int, sector, sectors uint64) error
	failFlush func(role int) error
}

func newMem(g engine.Geometry) *memMembers {
	m := &memMembers{flushes: make([]int, g.Members)}
	for range g.Members {
		m.cache = append(m.cache, make([]byte, g.MemberSectors<<9))
		m.durable = append(m.durable, make([]byte, g.MemberSectors<<9))
	}
	return m
}

func checkIO(p []byte, sector uint64, size int) error {
	if len(p)%512 != 0 || len(p) == 0 {
		return fmt.Errorf("buffer of %d bytes", len(p))
	}
	if off := int(sector << 9); off+len(p) > size {
		return fmt.Errorf("sectors %d+%d beyond the member (%d)", sector, len(p)>>9, size>>9)
	}
	return nil
}

func (m *memMembers) ReadAt(role int, p []byte, sector uint64) error {
	if m.failRead != nil {
		if err := m.failRead(role, sector, uint64(len(p)>>9)); err != nil {
			return err
		}
	}
	m.mu.Lock()
	err := checkIO(p, sector, len(m.cache[role]))
	if err == nil {
		copy(p, m.cache[role][sector<<9:])
	}
	m.mu.Unlock()
	if m.readDelay > 0 {
		time.Sleep(m.readDelay)
	}
	return err
}

func (m *memMembers) WriteAt(role int, p []byte, sector uint64) error {
	if m.failWrite != nil {
		if err := m.failWrite(role, sector, uint64(len(p)>>9)); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := checkIO(p, sector, len(m.cache[role])); err != nil {
		return err
	}
	copy(m.cache[role][sector<<9:], p)
	return nil
}

func (m *memMembers) Flush(role int) error {
	if m.failFlush != nil {
		if err := m.failFlush(role); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.durable[role], m.cache[role])
	m.flushes[role]++
	return nil
}

// crash reverts every member to what was flushed.
func (m *memMembers) crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.cache {
		copy(m.cache[i], m.durable[i])
	}
}

// sector returns member role's sector s (cache); only while no I/O runs.
func (m *memMembers) sector(role int, s uint64) []byte {
	return m.cache[role][s<<9 : (s+1)<<9]
}

// fillBytes fills b with pseudo-random bytes from seed.
func fillBytes(b []byte, seed uint64) {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	key[2] = byte(len(b))
	rand.NewChaCha8(key).Read(b)
}

// fillRandom gives every member different random data, durable.
func (m *memMembers) fillRandom(seed uint64) {
	for i := range m.cache {
		fillBytes(m.cache[i], seed*64+uint64(i))
		copy(m.durable[i], m.cache[i])
	}
}

// image is a reference array image.
type image []byte

func randomImage(g engine.Geometry, seed uint64) image {
	img := make(image, g.ArraySectors()<<9)
	fillBytes(img, seed*64+63)
	return img
}

// writeImage writes img to every copy (skipping roles in except), durably.
func (m *memMembers) writeImage(g engine.Geometry, img image, except ...int) {
	var buf [engine.MaxCopies]engine.Location
	for s := range g.ArraySectors() {
		for _, l := range g.Locate(s, buf[:0]) {
			skip := false
			for _, e := range except {
				skip = skip || e == l.Member
			}
			if !skip {
				copy(m.cache[l.Member][l.Sector<<9:(l.Sector+1)<<9], img[s<<9:])
			}
		}
	}
	for i := range m.cache {
		copy(m.durable[i], m.cache[i])
	}
}

// fakeClock is a Clock whose Sleep advances time instantly; step, if set,
// is added on every Now.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	step  time.Duration
	slept time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
		c.slept += d
	}
	return nil
}

func (c *fakeClock) elapsed(since time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(since)
}

// testGeometries: raid1 with 2 and 3 copies; raid10 n2, f2, o2 with 2..6
// members and n3 with 3..6; small chunks so jobs take many steps, member
// sizes that leave partial chunks and (raid1) a partial 4 KiB block.
func testGeometries() []engine.Geometry {
	gs := []engine.Geometry{
		{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 9*2048 + 3},
		{Level: engine.Level1, Members: 3, ChunkSectors: 128, MemberSectors: 7*2048 + 500},
	}
	for _, l := range []engine.Layout{engine.LayoutN2, engine.LayoutF2, engine.LayoutO2, engine.LayoutN3} {
		for n := l.Copies(); n <= 6; n++ {
			gs = append(gs, engine.Geometry{Level: engine.Level10, Members: n, Layout: l, ChunkSectors: 16, MemberSectors: 37*16 + 5})
		}
	}
	return gs
}

func geoName(g engine.Geometry) string {
	return fmt.Sprintf("%s%sx%d", g.Level, g.Layout, g.Members)
}

func mustArray(t testing.TB, g engine.Geometry) *engine.Array {
	t.Helper()
	a, err := engine.NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startRebuild marks targets rebuilding from offset 0.
func startRebuild(arr *engine.Array, targets ...int) {
	arr.Update(func(ms []engine.MemberStatus) {
		for _, t := range targets {
			ms[t] = engine.MemberStatus{State: engine.MemberRebuilding}
		}
	})
}

// advance returns a Progress callback that moves the targets' RebuildOffset
// to reached, as the daemon does, and records the durable positions.
func advance(arr *engine.Array, targets []int, durable *[]uint64) func(reached, d uint64) error {
	return func(reached, d uint64) error {
		arr.Update(func(ms []engine.MemberStatus) {
			for _, t := range targets {
				if ms[t].State == engine.MemberRebuilding {
					ms[t].RebuildOffset = reached
				}
			}
		})
		if durable != nil {
			*durable = append(*durable, d)
		}
		return nil
	}
}

func finishRebuild(arr *engine.Array, targets ...int) {
	arr.Update(func(ms []engine.MemberStatus) {
		for _, t := range targets {
			ms[t] = engine.MemberStatus{State: engine.MemberActive}
		}
	})
}

// assertCopiesEqual checks that every copy of every array sector equals
// img, or (img nil) the lowest-numbered member's copy.
func assertCopiesEqual(t testing.TB, g engine.Geometry, m *memMembers, img image, what string) {
	t.Helper()
	var buf [engine.MaxCopies]engine.Location
	bad := 0
	for s := range g.ArraySectors() {
		locs := g.Locate(s, buf[:0])
		want := []byte(nil)
		if img != nil {
			want = img[s<<9 : (s+1)<<9]
		} else {
			low := locs[0]
			for _, l := range locs {
				if l.Member < low.Member {
					low = l
				}
			}
			want = m.sector(low.Member, low.Sector)
		}
		for _, l := range locs {
			if !bytes.Equal(m.sector(l.Member, l.Sector), want) {
				if bad < 5 {
					t.Errorf("%s: %s: array sector %d: copy on member %d sector %d differs", geoName(g), what, s, l.Member, l.Sector)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %s: %d copies differ", geoName(g), what, bad)
	}
}

var errInjected = errors.New("injected I/O error")
