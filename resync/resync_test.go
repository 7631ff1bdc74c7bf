package resync

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

func newSyncer(arr *engine.Array, m Members, cfg Config) (*Syncer, *engine.Barrier) {
	bar := engine.NewBarrier(7, nil)
	return New(arr, bar, m, cfg), bar
}

// TestRebuild: members full of differing data; rebuilding each member in
// turn makes its copies equal the chosen source copy (the lowest-numbered
// other member holding the sector) everywhere.
func TestRebuild(t *testing.T) {
	for _, g := range testGeometries() {
		for target := range g.Members {
			arr := mustArray(t, g)
			m := newMem(g)
			m.fillRandom(uint64(target))
			want := newMem(g)
			want.fillRandom(uint64(target))
			startRebuild(arr, target)
			s, _ := newSyncer(arr, m, Config{})
			var durable []uint64
			res, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{target}, Progress: advance(arr, []int{target}, &durable)})
			if err != nil {
				t.Fatalf("%s target %d: %v", geoName(g), target, err)
			}
			if res.End != g.MemberSectors || durable[len(durable)-1] != g.MemberSectors {
				t.Fatalf("%s: ended at %d, durable %d, want %d", geoName(g), res.End, durable[len(durable)-1], g.MemberSectors)
			}
			if done, total := s.Progress(); done != total || total != g.MemberSectors {
				t.Fatalf("%s: Progress() = %d, %d", geoName(g), done, total)
			}
			// Expected: each copy on the target replaced by the copy of
			// the lowest-numbered other member, nothing else changed.
			var buf [engine.MaxCopies]engine.Location
			for a := range g.ArraySectors() {
				locs := g.Locate(a, buf[:0])
				var src, dst engine.Location
				src.Member = g.Members
				for _, l := range locs {
					if l.Member == target {
						dst = l
					} else if l.Member < src.Member {
						src = l
					}
				}
				for _, l := range locs {
					w := want.sector(l.Member, l.Sector)
					if l.Member == target {
						w = want.sector(src.Member, src.Sector)
					}
					if !bytes.Equal(m.sector(l.Member, l.Sector), w) {
						t.Fatalf("%s target %d: array sector %d copy %v: wrong data (source %v, target %v)", geoName(g), target, a, l, src, dst)
					}
				}
			}
			if m.flushes[target] == 0 {
				t.Fatalf("%s: target never flushed", geoName(g))
			}
		}
	}
}

// TestRebuildTwoTargets: raid1 x3 with two targets (copied together) and
// raid10 n2 x4 with one target in each mirror pair.
func TestRebuildTwoTargets(t *testing.T) {
	for _, c := range []struct {
		g       engine.Geometry
		targets []int
	}{
		{engine.Geometry{Level: engine.Level1, Members: 3, ChunkSectors: 128, MemberSectors: 4500}, []int{0, 2}},
		{engine.Geometry{Level: engine.Level10, Members: 4, Layout: engine.LayoutN2, ChunkSectors: 16, MemberSectors: 600}, []int{1, 2}},
		{engine.Geometry{Level: engine.Level10, Members: 5, Layout: engine.LayoutN3, ChunkSectors: 16, MemberSectors: 600}, []int{0, 4}},
	} {
		arr := mustArray(t, c.g)
		m := newMem(c.g)
		img := randomImage(c.g, 3)
		m.writeImage(c.g, img, c.targets...)
		startRebuild(arr, c.targets...)
		s, _ := newSyncer(arr, m, Config{})
		if _, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: c.targets, Progress: advance(arr, c.targets, nil)}); err != nil {
			t.Fatalf("%s %v: %v", geoName(c.g), c.targets, err)
		}
		assertCopiesEqual(t, c.g, m, img, "after rebuilding two")
	}
}

// userWriters write random 4 KiB blocks through the barrier (Enter, then
// plan from the current state, write every writable copy, Exit) and keep
// the reference image. Writer w owns the blocks b with b%n == w, so the
// reference is unambiguous.
type userWriters struct {
	g      engine.Geometry
	arr    *engine.Array
	bar    *engine.Barrier
	m      *memMembers
	img    image
	bypass bool // skip the barrier (to show the test catches the race)

	mu     sync.Mutex
	cond   *sync.Cond
	gen    int
	stop   atomic.Bool
	wg     sync.WaitGroup
	writes atomic.Int64
	parked atomic.Int64
}

func (u *userWriters) wake() {
	u.mu.Lock()
	u.gen++
	u.mu.Unlock()
	u.cond.Broadcast()
}

func (u *userWriters) start(n int) {
	u.cond = sync.NewCond(&u.mu)
	blocks := u.g.ArraySectors() / 8
	for w := range n {
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			data := make([]byte, 4096)
			var buf [engine.MaxCopies]engine.Location
			for !u.stop.Load() {
				b := rng.Uint64N(blocks/uint64(n))*uint64(n) + uint64(w)
				if b >= blocks {
					continue
				}
				s := b * 8
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				if !u.bypass {
					for {
						u.mu.Lock()
						gen := u.gen
						u.mu.Unlock()
						if u.bar.Enter(s, 8) {
							break
						}
						u.parked.Add(1)
						u.mu.Lock()
						for u.gen == gen {
							u.cond.Wait()
						}
						u.mu.Unlock()
					}
				}
				st := u.arr.State()
				for _, l := range u.g.Locate(s, buf[:0]) {
					if ms := st.Members[l.Member].State; ms == engine.MemberActive || ms == engine.MemberRebuilding {
						if err := u.m.WriteAt(l.Member, data, l.Sector); err != nil {
							panic(err)
						}
					}
				}
				copy(u.img[s<<9:], data)
				if !u.bypass {
					u.bar.Exit(s, 8)
				}
				u.writes.Add(1)
				time.Sleep(time.Duration(rng.IntN(20)) * time.Microsecond)
			}
		}()
	}
}

// rebuildUnderWrites rebuilds a target while writers run and returns the
// number of copies that differ from the reference afterwards.
func rebuildUnderWrites(t *testing.T, g engine.Geometry, target int, bypass bool) (bad int, writes int64) {
	arr := mustArray(t, g)
	m := newMem(g)
	m.readDelay = 50 * time.Microsecond
	img := randomImage(g, 11)
	m.writeImage(g, img, target)
	startRebuild(arr, target)
	u := &userWriters{g: g, arr: arr, m: m, img: img, bypass: bypass}
	u.bar = engine.NewBarrier(4, func() { u.wake() })
	s := New(arr, u.bar, m, Config{})
	u.start(4)
	// Let the writers run before and during the rebuild.
	time.Sleep(2 * time.Millisecond)
	_, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{target}, Progress: advance(arr, []int{target}, nil)})
	time.Sleep(2 * time.Millisecond)
	u.stop.Store(true)
	u.wake()
	u.wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	finishRebuild(arr, target)
	var buf [engine.MaxCopies]engine.Location
	for a := range g.ArraySectors() {
		for _, l := range g.Locate(a, buf[:0]) {
			if !bytes.Equal(m.sector(l.Member, l.Sector), img[a<<9:(a+1)<<9]) {
				bad++
			}
		}
	}
	t.Logf("%s: %d writes refused while a range was raised", geoName(g), u.parked.Load())
	return bad, u.writes.Load()
}

// TestRebuildUnderUserWrites: rebuilding while user writes go on leaves
// every copy equal to the reference image.
func TestRebuildUnderUserWrites(t *testing.T) {
	for _, g := range testGeometries() {
		target := g.Members - 1
		bad, writes := rebuildUnderWrites(t, g, target, false)
		if bad != 0 {
			t.Fatalf("%s: %d copies differ from the reference after a rebuild under %d writes", geoName(g), bad, writes)
		}
		if writes == 0 {
			t.Fatalf("%s: no user writes happened", geoName(g))
		}
		t.Logf("%s: %d user writes around the rebuild", geoName(g), writes)
	}
}

// TestRebuildUnderUserWritesNeedsBarrier shows that the test above is
// sensitive: with the writers bypassing the barrier, the rebuild writes
// stale data over user writes.
func TestRebuildUnderUserWritesNeedsBarrier(t *testing.T) {
	if testing.Short() {
		t.Skip("demonstration of the race")
	}
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 5003}
	for try := range 5 {
		bad, writes := rebuildUnderWrites(t, g, 1, true)
		t.Logf("try %d: without the barrier %d copies differ after %d writes", try, bad, writes)
		if bad > 0 {
			return
		}
	}
	t.Fatal("bypassing the barrier never produced a stale copy: the test cannot see the race")
}

// TestResync: after an unclean stop (copies differ), resync makes every
// copy equal the lowest-numbered member's, and check then reports 0.
func TestResync(t *testing.T) {
	for _, g := range testGeometries() {
		arr := mustArray(t, g)
		m := newMem(g)
		m.fillRandom(5)
		want := newMem(g)
		want.fillRandom(5)
		s, _ := newSyncer(arr, m, Config{})
		if _, err := s.Run(context.Background(), Job{Kind: Resync}); err != nil {
			t.Fatal(err)
		}
		var buf [engine.MaxCopies]engine.Location
		for a := range g.ArraySectors() {
			locs := g.Locate(a, buf[:0])
			low := locs[0]
			for _, l := range locs {
				if l.Member < low.Member {
					low = l
				}
			}
			for _, l := range locs {
				if !bytes.Equal(m.sector(l.Member, l.Sector), want.sector(low.Member, low.Sector)) {
					t.Fatalf("%s: array sector %d: copy %v is not member %d's", geoName(g), a, l, low.Member)
				}
			}
		}
		res, err := s.Run(context.Background(), Job{Kind: Check})
		if err != nil || res.Mismatches != 0 {
			t.Fatalf("%s: check after resync: %d mismatches, %v", geoName(g), res.Mismatches, err)
		}
	}
}

// TestCheckRepair: check counts, per copy, the 4 KiB blocks corrupted
// where it differs from the lowest-numbered copy (as md adds a range once
// per copy that differs), repair rewrites them, and check then reports 0.
func TestCheckRepair(t *testing.T) {
	for _, g := range testGeometries() {
		arr := mustArray(t, g)
		m := newMem(g)
		img := randomImage(g, 8)
		m.writeImage(g, img)
		s, _ := newSyncer(arr, m, Config{})
		res, err := s.Run(context.Background(), Job{Kind: Check})
		if err != nil || res.Mismatches != 0 {
			t.Fatalf("%s: clean check: %d mismatches, %v", geoName(g), res.Mismatches, err)
		}
		rng := rand.New(rand.NewPCG(uint64(g.Members), 1))
		size := g.ArraySectors()
		blocks := (size + 7) / 8
		corrupt := map[uint64]bool{}
		var buf [engine.MaxCopies]engine.Location
		for range 20 {
			b := rng.Uint64N(blocks)
			corrupt[b] = true
			// Corrupt one sector of the block on one or two copies.
			s := b*8 + rng.Uint64N(min(8, size-b*8))
			locs := g.Locate(s, buf[:0])
			for range 1 + rng.IntN(2) {
				l := locs[rng.IntN(len(locs))]
				m.cache[l.Member][l.Sector<<9+uint64(rng.IntN(512))] ^= 0x5a
			}
		}
		// Each copy that differs from the lowest-numbered one, per block.
		var want uint64
		for b := range corrupt {
			n := min(8, size-b*8)
			var copies [][]byte
			for sec := b * 8; sec < b*8+n; sec++ {
				for k, l := range sortedByMember(g.Locate(sec, buf[:0])) {
					if k == len(copies) {
						copies = append(copies, nil)
					}
					copies[k] = append(copies[k], m.cache[l.Member][l.Sector<<9:(l.Sector+1)<<9]...)
				}
			}
			for _, c := range copies[1:] {
				if !bytes.Equal(c, copies[0]) {
					want++
				}
			}
		}
		res, err = s.Run(context.Background(), Job{Kind: Check})
		if err != nil || res.Mismatches != want {
			t.Fatalf("%s: check: %d mismatches, want %d (%v)", geoName(g), res.Mismatches, want, err)
		}
		res, err = s.Run(context.Background(), Job{Kind: Repair})
		if err != nil || res.Mismatches != want || res.Repaired < want {
			t.Fatalf("%s: repair: %d mismatches, %d repaired, want %d (%v)", geoName(g), res.Mismatches, res.Repaired, want, err)
		}
		res, err = s.Run(context.Background(), Job{Kind: Check})
		if err != nil || res.Mismatches != 0 {
			t.Fatalf("%s: check after repair: %d mismatches (%v)", geoName(g), res.Mismatches, err)
		}
		assertCopiesEqual(t, g, m, nil, "after repair")
	}
}

// TestRebuildResume: a rebuild stopped by a crash resumes from the last
// durable position it reported and ends with every copy right; a durable
// position is never ahead of what was flushed.
func TestRebuildResume(t *testing.T) {
	for _, g := range testGeometries() {
		target := 0
		arr := mustArray(t, g)
		m := newMem(g)
		img := randomImage(g, 21)
		m.writeImage(g, img, target)
		startRebuild(arr, target)
		clk := newFakeClock()
		clk.step = time.Millisecond // every step takes a few ms
		s, _ := newSyncer(arr, m, Config{Clock: clk, FlushInterval: 4 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		var checkpoint uint64
		var snapshot [][]byte
		calls := 0
		prog := advance(arr, []int{target}, nil)
		_, err := s.Run(ctx, Job{Kind: Rebuild, Targets: []int{target}, Progress: func(reached, durable uint64) error {
			calls++
			if durable > reached {
				t.Errorf("durable %d ahead of reached %d", durable, reached)
			}
			if durable > checkpoint && snapshot == nil {
				checkpoint = durable
			}
			if snapshot == nil && checkpoint > 0 && reached > checkpoint && reached < g.MemberSectors {
				// Crash here: keep only what was flushed.
				m.mu.Lock()
				for _, d := range m.durable {
					snapshot = append(snapshot, bytes.Clone(d))
				}
				m.mu.Unlock()
				cancel()
			}
			return prog(reached, durable)
		}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: stopped rebuild returned %v", geoName(g), err)
		}
		if checkpoint == 0 || checkpoint >= g.MemberSectors {
			t.Fatalf("%s: checkpoint %d: test needs one inside the member", geoName(g), checkpoint)
		}
		for i := range m.cache {
			copy(m.durable[i], snapshot[i])
		}
		m.crash()
		// Restart: the superblock says rebuilding up to the checkpoint.
		arr = mustArray(t, g)
		arr.Update(func(ms []engine.MemberStatus) {
			ms[target] = engine.MemberStatus{State: engine.MemberRebuilding, RebuildOffset: checkpoint}
		})
		// Below the checkpoint the target must already be right.
		var buf [engine.MaxCopies]engine.Location
		for a := range g.ArraySectors() {
			for _, l := range g.Locate(a, buf[:0]) {
				if l.Member == target && l.Sector < checkpoint && !bytes.Equal(m.sector(l.Member, l.Sector), img[a<<9:(a+1)<<9]) {
					t.Fatalf("%s: target sector %d below checkpoint %d is not durable", geoName(g), l.Sector, checkpoint)
				}
			}
		}
		s, _ = newSyncer(arr, m, Config{})
		res, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{target}, Start: checkpoint, Progress: advance(arr, []int{target}, nil)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Start != checkpoint || res.Synced+res.Skipped > g.MemberSectors-checkpoint {
			t.Fatalf("%s: resumed run did %d+%d sectors from %d", geoName(g), res.Synced, res.Skipped, res.Start)
		}
		assertCopiesEqual(t, g, m, img, "after resume")
	}
}

// TestThrottleMax: never faster than MaxBytesPerSec.
func TestThrottleMax(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 16 << 11} // 16 MiB
	arr := mustArray(t, g)
	m := newMem(g)
	startRebuild(arr, 1)
	clk := newFakeClock()
	start := clk.Now()
	const limit = 2 << 20
	var worst float64
	s, _ := newSyncer(arr, m, Config{Clock: clk, MaxBytesPerSec: limit})
	_, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{1}, Progress: func(reached, _ uint64) error {
		if el := clk.elapsed(start).Seconds(); el > 0 {
			worst = max(worst, float64(reached<<9)/el)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	el := clk.elapsed(start)
	if want := 8 * time.Second; el < want-time.Millisecond || el > want+time.Second {
		t.Fatalf("16 MiB at 2 MiB/s took %v, want about %v", el, want)
	}
	if worst > limit*1.01 {
		t.Fatalf("average speed reached %.0f B/s, above the maximum %d", worst, limit)
	}
}

// TestThrottleBusy: while user I/O is going on, the job slows down to the
// minimum; when idle it runs at full speed (no sleeps).
func TestThrottleBusy(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 8 << 11} // 8 MiB
	for _, busy := range []bool{false, true} {
		arr := mustArray(t, g)
		clk := newFakeClock()
		start := clk.Now()
		calls := 0
		s, _ := newSyncer(arr, newMem(g), Config{Clock: clk, MinBytesPerSec: 1 << 20, MaxBytesPerSec: 100 << 20,
			Busy: func() bool { calls++; return busy }})
		if _, err := s.Run(context.Background(), Job{Kind: Check}); err != nil {
			t.Fatal(err)
		}
		el := clk.elapsed(start)
		want := 80 * time.Millisecond // 8 MiB at the max
		if busy {
			want = 8 * time.Second // at the min
		}
		if el < want-10*time.Millisecond || el > want+100*time.Millisecond {
			t.Fatalf("busy %v: 8 MiB took %v, want about %v", busy, el, want)
		}
		if calls == 0 {
			t.Fatal("Busy never asked")
		}
	}
}

// TestTargetWriteError: a failing target ends the job with its error and
// OnMemberError is told.
func TestTargetWriteError(t *testing.T) {
	for _, g := range testGeometries() {
		arr := mustArray(t, g)
		m := newMem(g)
		target := g.Members - 1
		m.failWrite = func(role int, sector, _ uint64) error {
			if role == target && sector >= 64 {
				return errInjected
			}
			return nil
		}
		startRebuild(arr, target)
		var told []int
		s, _ := newSyncer(arr, m, Config{})
		_, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{target},
			OnMemberError: func(role int, err error) {
				if !errors.Is(err, errInjected) {
					t.Errorf("OnMemberError(%d, %v): not the injected error", role, err)
				}
				told = append(told, role)
			}})
		var merr *MemberError
		if !errors.Is(err, errInjected) || !errors.As(err, &merr) || merr.Role != target || merr.Op != "write" {
			t.Fatalf("%s: job returned %v, want the target's write error", geoName(g), err)
		}
		if len(told) != 1 || told[0] != target {
			t.Fatalf("%s: OnMemberError called for %v, want [%d]", geoName(g), told, target)
		}
		if _, total := s.Progress(); total != g.MemberSectors {
			t.Fatalf("%s: total %d", geoName(g), total)
		}
	}
}

// TestSourceReadError: a source that fails reading is replaced by another
// copy and rewritten; with no other copy the job stops with ErrNoCopy.
func TestSourceReadError(t *testing.T) {
	// raid1 x3 rebuilding member 2: member 0 fails reading sectors
	// 100..199 once; member 1 serves them, member 0 is rewritten.
	g := engine.Geometry{Level: engine.Level1, Members: 3, ChunkSectors: 128, MemberSectors: 4500}
	arr := mustArray(t, g)
	m := newMem(g)
	img := randomImage(g, 4)
	m.writeImage(g, img, 2)
	// Member 0's copy of 100..199 is unreadable (and holds garbage).
	for i := 100 << 9; i < 200<<9; i++ {
		m.cache[0][i] ^= 0xff
	}
	var healed atomic.Bool
	m.failRead = func(role int, sector, sectors uint64) error {
		if role == 0 && sector < 200 && sector+sectors > 100 && !healed.Load() {
			return errInjected
		}
		return nil
	}
	m.failWrite = func(role int, sector, sectors uint64) error {
		if role == 0 && sector <= 100 && sector+sectors >= 200 {
			healed.Store(true)
		}
		return nil
	}
	startRebuild(arr, 2)
	s, _ := newSyncer(arr, m, Config{})
	res, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{2}, Progress: advance(arr, []int{2}, nil),
		OnMemberError: func(role int, err error) { t.Errorf("OnMemberError(%d, %v) for a recovered read", role, err) }})
	if err != nil || res.ReadErrors != 1 || !healed.Load() {
		t.Fatalf("rebuild with a bad source range: %v, %d read errors, rewritten %v", err, res.ReadErrors, healed.Load())
	}
	assertCopiesEqual(t, g, m, img, "after read repair")

	// raid1 x2 rebuilding member 1: member 0 is the only source.
	g.Members = 2
	arr = mustArray(t, g)
	m = newMem(g)
	m.failRead = func(role int, sector, sectors uint64) error {
		if role == 0 && sector >= 2048 {
			return errInjected
		}
		return nil
	}
	startRebuild(arr, 1)
	var told []int
	s, _ = newSyncer(arr, m, Config{})
	_, err = s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{1}, OnMemberError: func(role int, _ error) { told = append(told, role) }})
	// The job stops there; the only source is not blamed (md fails no
	// device for a block no copy can be read from).
	if !errors.Is(err, engine.ErrNoCopy) || !errors.Is(err, errInjected) || len(told) != 0 {
		t.Fatalf("unreadable source: %v, told %v", err, told)
	}
}

// TestFlushError: a member that fails to flush stops the job before any
// durable position is reported for it.
func TestFlushError(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 5003}
	arr := mustArray(t, g)
	m := newMem(g)
	m.failFlush = func(role int) error {
		if role == 1 {
			return errInjected
		}
		return nil
	}
	startRebuild(arr, 1)
	s, _ := newSyncer(arr, m, Config{})
	var durable []uint64
	_, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{1}, Progress: advance(arr, []int{1}, &durable)})
	var merr *MemberError
	if !errors.As(err, &merr) || merr.Op != "flush" || merr.Role != 1 {
		t.Fatalf("flush error: %v", err)
	}
	for _, d := range durable {
		if d != 0 {
			t.Fatalf("durable %d reported although the target never flushed", d)
		}
	}
}

// TestNeed: ranges Need refuses are not copied.
func TestNeed(t *testing.T) {
	g := engine.Geometry{Level: engine.Level10, Members: 4, Layout: engine.LayoutF2, ChunkSectors: 16, MemberSectors: 37*16 + 5}
	arr := mustArray(t, g)
	m := newMem(g)
	m.fillRandom(1)
	orig := newMem(g)
	orig.fillRandom(1)
	startRebuild(arr, 3)
	need := func(a, n uint64) bool { return (a/64)%2 == 0 } // every other 64-sector region
	s, _ := newSyncer(arr, m, Config{})
	res, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{3}, Need: need})
	if err != nil || res.Skipped == 0 || res.Synced == 0 {
		t.Fatalf("%v: synced %d skipped %d", err, res.Synced, res.Skipped)
	}
	var buf [engine.MaxCopies]engine.Location
	for a := range g.ArraySectors() {
		for _, l := range g.Locate(a, buf[:0]) {
			if l.Member != 3 {
				continue
			}
			changed := !bytes.Equal(m.sector(3, l.Sector), orig.sector(3, l.Sector))
			if changed != need(a, 1) {
				t.Fatalf("array sector %d: target changed %v, needed %v", a, changed, need(a, 1))
			}
		}
	}
}

func TestRejects(t *testing.T) {
	raid0 := mustArray(t, engine.Geometry{Level: engine.Level0, Members: 2, ChunkSectors: 16, MemberSectors: 160})
	s, _ := newSyncer(raid0, newMem(raid0.Geo), Config{})
	if _, err := s.Run(context.Background(), Job{Kind: Check}); !errors.Is(err, ErrNoRedundancy) {
		t.Fatalf("raid0 check: %v", err)
	}
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 5003}
	arr := mustArray(t, g)
	s, _ = newSyncer(arr, newMem(g), Config{})
	for _, job := range []Job{
		{Kind: Rebuild},
		{Kind: Rebuild, Targets: []int{2}},
		{Kind: Rebuild, Targets: []int{1, 1}},
		{Kind: Check, Targets: []int{1}},
		{Kind: Check, Start: g.MemberSectors + 1},
		{Kind: 42},
	} {
		if _, err := s.Run(context.Background(), job); err == nil {
			t.Errorf("job %+v accepted", job)
		}
	}
	// Both copies of a raid1 x2 being rebuilt: no source.
	startRebuild(arr, 0, 1)
	if _, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{0, 1}}); !errors.Is(err, engine.ErrNoCopy) {
		t.Fatalf("rebuild with no source: %v", err)
	}
	// A target failed meanwhile stops the rebuild.
	arr.Fail(1)
	if _, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{1}}); !errors.Is(err, ErrTargetGone) {
		t.Fatalf("rebuild of a faulty member: %v", err)
	}
}

// TestProgressConcurrent reads Progress from another goroutine while a job
// runs; a second Run meanwhile is refused with ErrBusy.
func TestProgressConcurrent(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 4 << 11}
	arr := mustArray(t, g)
	m := newMem(g)
	m.readDelay = 100 * time.Microsecond
	s, _ := newSyncer(arr, m, Config{})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			d, total := s.Progress()
			if d < last || (total != 0 && d > total) {
				t.Errorf("Progress went from %d to %d/%d", last, d, total)
			}
			last = d
			runtime.Gosched()
		}
	}()
	var second error
	_, err := s.Run(context.Background(), Job{Kind: Check, Progress: func(reached, durable uint64) error {
		if second == nil {
			_, second = s.Run(context.Background(), Job{Kind: Check})
		}
		return nil
	}})
	close(stop)
	<-done
	if err != nil || !errors.Is(second, ErrBusy) {
		t.Fatalf("run: %v; second run meanwhile: %v", err, second)
	}
}

func BenchmarkCheck(b *testing.B) {
	g := engine.Geometry{Level: engine.Level10, Members: 4, Layout: engine.LayoutN2, ChunkSectors: 1024, MemberSectors: 16 << 11}
	arr := mustArray(b, g)
	m := newMem(g)
	s, _ := newSyncer(arr, m, Config{})
	b.SetBytes(int64(g.ArraySectors() << 9))
	for b.Loop() {
		if _, err := s.Run(context.Background(), Job{Kind: Check}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRebuildTargetReplaced: a rebuild target failed and put back (a new
// device in its role, rebuilding from 0) while the job runs, between two
// steps or during one, stops the job with ErrTargetGone before it reports
// progress for it: the progress would move the new device's RebuildOffset
// over data it does not hold. Found by TestStackModel (raid10 o3 x5): a
// running rebuild of member 4 did not notice that member 4 had died and
// been replaced, reported reaching sector 80, and reads of the new device
// below that returned garbage.
func TestRebuildTargetReplaced(t *testing.T) {
	g := engine.Geometry{Level: engine.Level10, Members: 4, Layout: engine.LayoutN2, ChunkSectors: 16, MemberSectors: 20 * 16}
	replace := func(arr *engine.Array) {
		arr.Fail(3)
		arr.Update(func(ms []engine.MemberStatus) { ms[3] = engine.MemberStatus{State: engine.MemberRebuilding} })
	}
	for _, during := range []bool{false, true} {
		arr := mustArray(t, g)
		m := newMem(g)
		m.writeImage(g, randomImage(g, 4), 3)
		startRebuild(arr, 3)
		prog := advance(arr, []int{3}, nil)
		calls, writes := 0, 0
		if during {
			m.failWrite = func(role int, _, _ uint64) error {
				if role == 3 {
					if writes++; writes == 3 {
						replace(arr) // between the step's copy and its report
					}
				}
				return nil
			}
		}
		s, _ := newSyncer(arr, m, Config{})
		_, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{3}, Progress: func(reached, durable uint64) error {
			calls++
			if err := prog(reached, durable); err != nil {
				return err
			}
			if !during && calls == 2 {
				replace(arr)
			}
			return nil
		}})
		if !errors.Is(err, ErrTargetGone) {
			t.Fatalf("during %v: job returned %v, want ErrTargetGone", during, err)
		}
		if calls != 2 {
			t.Fatalf("during %v: %d progress reports, want 2 (none after the replacement)", during, calls)
		}
		if st := arr.State().Members[3]; st.State != engine.MemberRebuilding || st.RebuildOffset != 0 {
			t.Fatalf("during %v: the new member is %+v, want rebuilding from 0", during, st)
		}
	}
}

// TestSyncSourceReplaced: a member failed and replaced by a new device
// during a step, after the step took its state, is not read as a source:
// the new device's contents would be copied as good data onto the target
// and, as read repair, over the other copies. Found by TestStackModel
// (raid10 n3 x3): during a rebuild of member 2, member 1 died and was
// replaced; the step's read of member 0 failed on a bad sector, the job
// fell back to member 1 as its state said, read the new device and wrote
// its garbage over member 2 and over member 0, an active member.
func TestSyncSourceReplaced(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 3, ChunkSectors: 128, MemberSectors: 4096}
	for _, kind := range []Kind{Rebuild, Repair} {
		arr := mustArray(t, g)
		m := newMem(g)
		img := randomImage(g, 9)
		var job Job
		if kind == Rebuild {
			m.writeImage(g, img, 2)
			startRebuild(arr, 2)
			job = Job{Kind: Rebuild, Targets: []int{2}, Progress: advance(arr, []int{2}, nil)}
		} else {
			m.writeImage(g, img)
			job = Job{Kind: Repair}
		}
		replaced, healed := false, false
		m.failWrite = func(role int, sector, _ uint64) error {
			healed = healed || (role == 0 && sector < 8) // (a rewrite cures it)
			return nil
		}
		m.failRead = func(role int, sector, _ uint64) error {
			if role == 0 && sector < 8 && !healed { // a bad block on member 0
				if !replaced {
					// Member 1 fails and a new device takes its role.
					replaced = true
					arr.Fail(1)
					arr.Update(func(ms []engine.MemberStatus) { ms[1] = engine.MemberStatus{State: engine.MemberRebuilding} })
					fillBytes(m.cache[1], 77)
				}
				return errInjected
			}
			return nil
		}
		s, _ := newSyncer(arr, m, Config{})
		_, err := s.Run(context.Background(), job)
		if kind == Rebuild && !errors.Is(err, engine.ErrNoCopy) {
			t.Fatalf("%v: job returned %v, want ErrNoCopy (no copy left to read the first step from)", kind, err)
		}
		for _, role := range []int{0, 2} {
			for sec := range uint64(8) {
				if bytes.Equal(m.sector(role, sec), m.sector(1, sec)) {
					t.Fatalf("%v: the new device's data was copied to member %d (sector %d)", kind, role, sec)
				}
			}
		}
		if kind == Repair {
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			for sec := range g.MemberSectors {
				for _, role := range []int{0, 2} {
					if !bytes.Equal(m.sector(role, sec), img[sec<<9:(sec+1)<<9]) {
						t.Fatalf("repair: member %d sector %d is not the array's data", role, sec)
					}
				}
			}
		}
	}
}

// TestSyncSourceReplacedDuringRead: the source member is failed and a
// new device put in its role while the step reads it, so the read is
// served by the new device: its data is not copied (rebuild) or taken as
// the good copy (repair). The job checked the member before the read
// only; found by the array model, through its read repair, which had the
// same gap (a repair wrote a new spare's zeroes over a current copy).
func TestSyncSourceReplacedDuringRead(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 3, ChunkSectors: 128, MemberSectors: 4096}
	for _, kind := range []Kind{Rebuild, Repair} {
		arr := mustArray(t, g)
		m := newMem(g)
		img := randomImage(g, 11)
		var job Job
		if kind == Rebuild {
			m.writeImage(g, img, 2)
			startRebuild(arr, 2)
			job = Job{Kind: Rebuild, Targets: []int{2}, Progress: advance(arr, []int{2}, nil)}
		} else {
			m.writeImage(g, img)
			job = Job{Kind: Repair}
		}
		replaced := false
		m.failRead = func(role int, sector, _ uint64) error {
			if role == 0 && !replaced {
				// Member 0 fails and a new device takes its role; this
				// read is the new device's.
				replaced = true
				arr.Fail(0)
				arr.Update(func(ms []engine.MemberStatus) { ms[0] = engine.MemberStatus{State: engine.MemberRebuilding} })
				fillBytes(m.cache[0], 77)
			}
			return nil
		}
		s, _ := newSyncer(arr, m, Config{})
		if _, err := s.Run(context.Background(), job); err != nil {
			t.Fatalf("%v: %v", kind, err)
		}
		if !replaced {
			t.Fatalf("%v: member 0 was never read", kind)
		}
		for _, role := range []int{1, 2} {
			for sec := range g.MemberSectors {
				if !bytes.Equal(m.sector(role, sec), img[sec<<9:(sec+1)<<9]) {
					t.Fatalf("%v: member %d sector %d is not the array's data (the new device's copied?)", kind, role, sec)
				}
			}
		}
	}
}

// TestResyncKeepsChosenCopy: a resync whose chosen copy (the lowest
// readable member, the one reads of a range awaiting resync answer from)
// fails to read a step takes only the blocks it cannot read from another
// copy: everything else keeps the chosen copy's data, which readers may
// have seen already. Found by TestStackModel (raid1 x3): after a crash,
// member 0 alone held a write that had been in flight, reads returned it,
// and a bad sector elsewhere in the step made the resync copy member 1's
// whole step over it.
func TestResyncKeepsChosenCopy(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	for _, unit := range []uint32{1, 8} {
		arr := mustArray(t, g)
		m := newMem(g)
		m.fillRandom(uint64(unit)) // the copies differ everywhere
		want := make([]byte, 0, 64<<9)
		want = append(want, m.cache[0]...)
		const bad = 9 // member 0's bad sector
		blk := uint64(bad) / uint64(unit) * uint64(unit)
		copy(want[blk<<9:(blk+uint64(unit))<<9], m.cache[1][blk<<9:])
		repaired := false
		m.failWrite = func(role int, sector, n uint64) error {
			if role == 0 && sector <= bad && bad < sector+n {
				repaired = true
			}
			return nil
		}
		m.failRead = func(role int, sector, n uint64) error {
			if role == 0 && !repaired && sector <= bad && bad < sector+n {
				return errInjected
			}
			return nil
		}
		s, _ := newSyncer(arr, m, Config{RetryUnit: unit})
		res, err := s.Run(context.Background(), Job{Kind: Resync})
		if err != nil {
			t.Fatalf("unit %d: %v", unit, err)
		}
		for sec := range g.MemberSectors {
			for role := range 2 {
				if !bytes.Equal(m.sector(role, sec), want[sec<<9:(sec+1)<<9]) {
					t.Fatalf("unit %d: member %d sector %d is not the chosen copy's data (or, for the bad block, member 1's)", unit, role, sec)
				}
			}
		}
		if !repaired || res.ReadErrors != 1 {
			t.Fatalf("unit %d: repaired %v, %d read errors", unit, repaired, res.ReadErrors)
		}
	}
}

// TestRebuildSkipsRebuiltPart: a rebuild of several targets starts at the
// lowest RebuildOffset; a target already rebuilt further holds current
// data below its offset, which reads may be answering from, and it is not
// copied again there (from a source whose data may differ: the copies of
// a range awaiting resync). Found by TestStackModel (raid10 o3 x5 after a
// crash): member 0 was rebuilding at 16 and the chosen copy of sector 3,
// member 1 at 0; the rebuild of both from 0 copied member 2's other
// candidate over member 0's sector 3, and its answer changed.
func TestRebuildSkipsRebuiltPart(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 3, ChunkSectors: 128, MemberSectors: 3000}
	const off = 100 // member 0's rebuild offset: inside the first step
	arr := mustArray(t, g)
	m := newMem(g)
	m.fillRandom(12) // the copies differ
	before := bytes.Clone(m.cache[0])
	arr.Update(func(ms []engine.MemberStatus) {
		ms[0] = engine.MemberStatus{State: engine.MemberRebuilding, RebuildOffset: off}
		ms[1] = engine.MemberStatus{State: engine.MemberRebuilding}
	})
	s, _ := newSyncer(arr, m, Config{})
	if _, err := s.Run(context.Background(), Job{Kind: Rebuild, Targets: []int{0, 1}, Progress: advance(arr, []int{0, 1}, nil)}); err != nil {
		t.Fatal(err)
	}
	// Below the offset member 0 is the lowest readable copy: member 1 is
	// rebuilt from it there, from member 2 above.
	for sec := range g.MemberSectors {
		want := m.sector(2, sec)
		if sec < off {
			want = before[sec<<9 : (sec+1)<<9]
		}
		if !bytes.Equal(m.sector(0, sec), want) {
			t.Fatalf("member 0 sector %d: rebuilt part rewritten, or rest not rebuilt (offset %d)", sec, off)
		}
		if !bytes.Equal(m.sector(1, sec), want) {
			t.Fatalf("member 1 sector %d not rebuilt from the lowest readable copy", sec)
		}
	}
}

// A copy rewritten after a read error is read back (md's
// fix_read_error), in every job that rewrites one: one whose sectors
// still fail to read after the rewrite is reported as a member error and
// stops the job, as a failed rewrite does, instead of counting as healed.
func TestSourceReadErrorRewriteReadBack(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 3, ChunkSectors: 128, MemberSectors: 4500}
	for _, kind := range []Kind{Rebuild, Resync, Check, Repair} {
		arr := mustArray(t, g)
		m := newMem(g)
		job := Job{Kind: kind}
		if kind == Rebuild {
			m.writeImage(g, randomImage(g, 4), 2)
			startRebuild(arr, 2)
			job = Job{Kind: Rebuild, Targets: []int{2}, Progress: advance(arr, []int{2}, nil)}
		} else {
			m.writeImage(g, randomImage(g, 4))
		}
		var rewritten bool
		m.failRead = func(role int, sector, sectors uint64) error {
			if role == 0 && sector < 200 && sector+sectors > 100 {
				return errInjected // before and after the rewrite
			}
			return nil
		}
		m.failWrite = func(role int, sector, sectors uint64) error {
			rewritten = rewritten || (role == 0 && sector <= 100 && sector+sectors >= 200)
			return nil
		}
		var told []error
		job.OnMemberError = func(role int, err error) {
			if role == 0 {
				told = append(told, err)
			}
		}
		s, _ := newSyncer(arr, m, Config{})
		_, err := s.Run(context.Background(), job)
		var me *MemberError
		if !rewritten || err == nil || len(told) != 1 || !errors.As(told[0], &me) || me.Op != "read back" || !errors.Is(err, errInjected) {
			t.Fatalf("%v, a rewrite that does not read back: rewritten %v, err %v, member 0 told %v", kind, rewritten, err, told)
		}
	}
}

// sortedByMember is locs in member order (the order check compares in).
func sortedByMember(locs []engine.Location) []engine.Location {
	out := slices.Clone(locs)
	slices.SortFunc(out, func(a, b engine.Location) int { return a.Member - b.Member })
	return out
}
