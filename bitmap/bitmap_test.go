package bitmap

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// A fresh array: regions start never written (nothing to sync); the
// first write to a region waits for its bit, and writes to it afterwards
// do not.
func TestFreshArrayWriteFlow(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{})
	g := b.Geometry()
	if got := b.DirtyRegions(nil); len(got) != 0 {
		t.Fatalf("fresh array has dirty regions %v", got)
	}
	if b.Written(7) || b.NeedsSync(7) {
		t.Fatal("fresh region is written or needs sync")
	}
	if b.StartWrite(7, 8, 100) {
		t.Fatal("write to a never-written region did not wait")
	}
	if b.Written(7) || b.State(7) != NeverWritten {
		t.Fatal("state changed before Prepare")
	}
	bt := b.Prepare()
	if bt == nil || len(bt.Blocks) != 1 || bt.Blocks[0].Index != 1 || bt.Events != 0 {
		t.Fatalf("batch %+v, want block 1 only", bt)
	}
	if !b.Written(7) || b.State(7) != Dirty {
		t.Fatal("region not dirty after Prepare")
	}
	// A write arriving while the batch is in flight waits for the next one.
	if b.StartWrite(8, 8, 101) {
		t.Fatal("write to a region whose bit is in flight did not wait")
	}
	if b.StartWrite(2000, 2000, 102) {
		t.Fatal("write to a clean region did not wait")
	}
	for m := range 2 {
		for _, blk := range bt.Blocks {
			a.write(m, blk)
		}
	}
	for m := range 2 {
		if s := a.diskState(t, &g, m, 7); s != Dirty {
			t.Fatalf("member %d: region 7 is %v on disk", m, s)
		}
	}
	rel := b.Committed(bt, nil)
	if !slices.Equal(rel, []Waiter{100, 101}) {
		t.Fatalf("released %v, want [100 101]", rel)
	}
	rel = a.flush(t, b)
	if !slices.Equal(rel, []Waiter{102}) {
		t.Fatalf("released %v, want [102]", rel)
	}
	// Durable-dirty: no wait, no batch.
	if !b.StartWrite(7, 8, 103) || !b.StartWrite(2000, 2000, 104) {
		t.Fatal("write to a durable-dirty region waited")
	}
	if bt := b.Prepare(); bt != nil {
		t.Fatalf("batch %+v with nothing to do", bt)
	}
	for _, w := range [][2]int{{7, 8}, {8, 8}, {2000, 2000}, {7, 8}, {2000, 2000}} {
		b.EndWrite(w[0], w[1])
	}
	if got := b.DirtyRegions(nil); !slices.Equal(got, []int{7, 8, 2000}) {
		t.Fatalf("dirty regions %v", got)
	}
	s := b.Stats()
	if s.WaitedWrites != 3 || s.DirtyRegions != 3 || s.NeverWrittenRegions != 2997 {
		t.Fatalf("stats %+v", s)
	}
}

// Regions are cleared after the delay, only when idle, and writes to a
// cleared region wait again.
func TestLazyClear(t *testing.T) {
	const d = 5 * time.Second
	b, a := newTestBitmap(t, 100, 512, 1, InitClean, Options{ClearDelay: d, MaxClearDelay: d})
	g := b.Geometry()
	a.tick(t, b, 0)
	b.StartWrite(1, 1, 1)
	b.StartWrite(2, 2, 2)
	a.flush(t, b)
	b.EndWrite(1, 1) // region 2's write stays in flight
	a.tick(t, b, time.Second)
	a.tick(t, b, d)
	if b.State(1) != Dirty {
		t.Fatal("cleared before the delay")
	}
	a.tick(t, b, time.Second+d)
	if b.State(1) != Clean || a.diskState(t, &g, 0, 1) != Clean {
		t.Fatal("not cleared after the delay")
	}
	a.tick(t, b, time.Hour)
	if b.State(2) != Dirty || a.diskState(t, &g, 0, 2) != Dirty {
		t.Fatal("region with a write in flight cleared")
	}
	b.EndWrite(2, 2)
	a.tick(t, b, time.Hour+time.Second)
	if b.State(2) != Dirty {
		t.Fatal("cleared right after its last write")
	}
	a.tick(t, b, time.Hour+time.Second+d)
	if b.State(2) != Clean {
		t.Fatal("not cleared")
	}
	if b.StartWrite(1, 1, 3) {
		t.Fatal("write to a cleared region did not wait")
	}
	if rel := a.flush(t, b); !slices.Equal(rel, []Waiter{3}) {
		t.Fatalf("released %v", rel)
	}
	if s := b.Stats(); s.Cleared != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// A write that races a clear in flight waits for the region to be dirty
// on disk again.
func TestWriteRacingClear(t *testing.T) {
	const d = time.Second
	b, a := newTestBitmap(t, 100, 512, 2, InitClean, Options{ClearDelay: d})
	g := b.Geometry()
	a.tick(t, b, 0)
	b.StartWrite(5, 5, 1)
	a.flush(t, b)
	b.EndWrite(5, 5)
	a.tick(t, b, d/2)
	bt := b.Tick(3 * d) // the clear of region 5
	if bt == nil || b.State(5) != Clean {
		t.Fatal("no clear batch")
	}
	if b.StartWrite(5, 5, 2) {
		t.Fatal("write during the clear did not wait")
	}
	if b.Prepare() != nil {
		t.Fatal("second batch for a block in flight")
	}
	var rel []Waiter
	for m := range 2 {
		for _, blk := range bt.Blocks {
			a.write(m, blk)
		}
	}
	if rel = b.Committed(bt, rel); len(rel) != 0 {
		t.Fatalf("released %v on the clear's commit", rel)
	}
	if a.diskState(t, &g, 0, 5) != Clean {
		t.Fatal("clear not written")
	}
	bt = b.Prepare()
	if bt == nil {
		t.Fatal("no re-dirty batch")
	}
	a.commit(b, bt, &rel)
	if !slices.Equal(rel, []Waiter{2}) || a.diskState(t, &g, 1, 5) != Dirty {
		t.Fatalf("released %v", rel)
	}
}

// A write between the clear decision and Prepare (the clear is not yet
// in a batch) drops the clear.
func TestClearDropped(t *testing.T) {
	b, a := newTestBitmap(t, 100, 512, 1, InitClean, Options{ClearDelay: time.Second})
	a.tick(t, b, 0)
	b.StartWrite(5, 5, 1)
	a.flush(t, b)
	b.EndWrite(5, 5)
	a.tick(t, b, time.Second/2)
	b.advance(10 * time.Second)
	b.clearIdle(false)
	if b.State(5) != Clean {
		t.Fatal("not cleared")
	}
	if b.StartWrite(5, 5, 2) {
		t.Fatal("did not wait")
	}
	bt := b.Prepare()
	var rel []Waiter
	a.commit(b, bt, &rel)
	if !slices.Equal(rel, []Waiter{2}) || b.State(5) != Dirty {
		t.Fatalf("released %v, state %v", rel, b.State(5))
	}
	if st := a.diskState(t, new(b.Geometry()), 0, 5); st != Dirty {
		t.Fatalf("disk says %v", st)
	}
}

// While a member is missing nothing is cleared; afterwards the regions
// written meanwhile are what a re-add recovers.
func TestMissingMemberKeepsDirty(t *testing.T) {
	const d = time.Second
	b, a := newTestBitmap(t, 100, 512, 2, InitClean, Options{ClearDelay: d})
	a.tick(t, b, 0)
	b.StartWrite(1, 1, 1)
	a.flush(t, b)
	b.SetMissing(1, true)
	b.EndWrite(1, 1)
	b.StartWrite(50, 50, 2)
	a.flush(t, b)
	b.EndWrite(50, 50)
	for s := range 100 {
		a.tick(t, b, time.Duration(s)*time.Minute)
	}
	if got := b.DirtyRegions(nil); !slices.Equal(got, []int{1, 50}) {
		t.Fatalf("dirty while degraded: %v", got)
	}
	b.SetMissing(1, false)
	a.tick(t, b, 101*time.Minute)
	a.tick(t, b, 102*time.Minute)
	if got := b.DirtyRegions(nil); len(got) != 0 {
		t.Fatalf("dirty after re-add: %v", got)
	}
}

// Load: the dirty regions need sync and are not cleared before
// ResyncDone; never-written and clean come back as they were.
func TestLoadNeedsSync(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{})
	for _, r := range []int{3, 1500} {
		b.StartWrite(r, r, 0)
	}
	a.flush(t, b)
	b.EndWrite(1500, 1500)
	a.tick(t, b, 0)
	a.tick(t, b, time.Minute)
	if b.State(1500) != Clean || b.State(3) != Dirty {
		t.Fatal("setup")
	}
	// Crash: region 3's write never ended.
	b2, info, err := a.load(t, 1)
	if err != nil {
		t.Fatal(err)
	}
	if info.Dirty != 1 || info.Clean != 1 || info.NeverWritten != 2998 || info.Copies[0].Err != nil || info.Copies[1].Err != nil {
		t.Fatalf("info %+v", info)
	}
	if !slices.Equal(b2.DirtyRegions(nil), []int{3}) || !b2.NeedsSync(3) || b2.NeedsSync(1500) || !b2.Written(1500) || b2.Written(4) {
		t.Fatal("loaded states wrong")
	}
	// Writes wait for the rewrite, which goes header last.
	if b2.StartWrite(3, 3, 9) {
		t.Fatal("write before the first batch committed")
	}
	bt := b2.Prepare()
	for _, blk := range bt.Blocks {
		if blk.Index == 0 {
			t.Fatal("header written with the data blocks")
		}
	}
	var rel []Waiter
	a.commit(b2, bt, &rel)
	if !slices.Equal(rel, []Waiter{9}) {
		t.Fatalf("released %v", rel)
	}
	bt = b2.Prepare()
	if bt == nil || len(bt.Blocks) != 1 || bt.Blocks[0].Index != 0 || bt.Events != 1 {
		t.Fatalf("header batch %+v", bt)
	}
	a.commit(b2, bt, &rel)
	b2.EndWrite(3, 3)
	for s := range 10 {
		a.tick(t, b2, time.Duration(s)*time.Hour)
	}
	if b2.State(3) != Dirty {
		t.Fatal("region needing sync was cleared")
	}
	b2.ResyncDone(3, 3)
	a.tick(t, b2, 11*time.Hour)
	a.tick(t, b2, 12*time.Hour)
	if b2.State(3) != Clean {
		t.Fatal("not cleared after resync")
	}
}

// Corrupt header or block on every member: Load fails clearly and
// AllDirty makes every region dirty.
func TestLoadCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(a *fakeArray, g *Geometry)
		want    error
		msg     string
	}{
		{"header checksum", func(a *fakeArray, g *Geometry) {
			for _, ar := range a.areas {
				ar[g.Start-g.AreaOffset+100] ^= 1
			}
		}, ErrCorrupt, "header: checksum mismatch"},
		{"header magic", func(a *fakeArray, g *Geometry) {
			for _, ar := range a.areas {
				ar[g.Start-g.AreaOffset] = 'x'
			}
		}, ErrNoBitmap, "no usable copy"},
		{"block checksum", func(a *fakeArray, g *Geometry) {
			for _, ar := range a.areas {
				ar[g.BlockOffset(2)-g.AreaOffset+7] ^= 4
			}
		}, ErrCorrupt, "block 2 (byte 10240 of the members) is unreadable on every member"},
		{"other array", func(a *fakeArray, g *Geometry) {
			a.cfg.ArrayUUID[3] ^= 1
		}, ErrMismatch, "bitmap of array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{})
			b.StartWrite(1, 1, 1)
			a.flush(t, b)
			g := b.Geometry()
			tc.corrupt(a, &g)
			_, info, err := a.load(t, 1)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Load error %v, want %v containing %q", err, tc.want, tc.msg)
			}
			if info == nil {
				t.Fatal("no info with the error")
			}
			cfg := a.cfg
			cfg.RegionSectors = 0
			all, err := AllDirty(cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(all.DirtyRegions(nil)); n != all.Geometry().Regions || !all.NeedsSync(0) {
				t.Fatalf("AllDirty: %d dirty regions of %d", n, all.Geometry().Regions)
			}
			if all.StartWrite(0, 0, 1) {
				t.Fatal("AllDirty: write before its first batch")
			}
			if rel := a.flush(t, all); len(rel) != 1 {
				t.Fatalf("released %v", rel)
			}
			if _, _, err := a.load(t, 1); err != nil {
				t.Fatalf("reload after AllDirty's rewrite: %v", err)
			}
		})
	}
}

// A block torn on one member is taken from the other; a stale copy
// (header events older than the superblock's) is not used.
func TestLoadRepairsAndStale(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 3, InitNeverWritten, Options{})
	b.StartWrite(1, 1, 1)
	a.flush(t, b)
	g := b.Geometry()
	a.areas[0][g.BlockOffset(1)-g.AreaOffset+9] ^= 1
	// Member 2 missed generation 2.
	b.SetEvents(2)
	bt := b.Prepare()
	for m := range 2 {
		for _, blk := range bt.Blocks {
			a.write(m, blk)
		}
	}
	b.Committed(bt, nil)
	b.StartWrite(2, 2, 2)
	bt = b.Prepare()
	for m := range 2 {
		for _, blk := range bt.Blocks {
			a.write(m, blk)
		}
	}
	b.Committed(bt, nil)
	b2, info, err := a.load(t, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Copies[0].BadBlocks) != 0 {
		// Block 1 was rewritten on member 0 by the second batch.
		t.Fatalf("info %+v", info.Copies[0])
	}
	if !errors.Is(info.Copies[2].Err, ErrStale) || !strings.Contains(info.Copies[2].Err.Error(), "header events 1 are older than the superblock's 2") {
		t.Fatalf("member 2: %v", info.Copies[2].Err)
	}
	if !slices.Equal(b2.DirtyRegions(nil), []int{1, 2}) || info.Events != 2 {
		t.Fatalf("dirty %v, events %d", b2.DirtyRegions(nil), info.Events)
	}
	// Tear block 1 on member 1 only.
	a.areas[1][g.BlockOffset(1)-g.AreaOffset+600] ^= 1
	_, info, err = a.load(t, 2)
	if err != nil || len(info.Copies[1].BadBlocks) != 1 || info.Copies[1].BadBlocks[0].Block != 1 || info.Dirty != 2 {
		t.Fatalf("load with a torn copy: %v, %+v", err, info)
	}
	// Every copy stale.
	if _, _, err := a.load(t, 3); !errors.Is(err, ErrStale) {
		t.Fatalf("all stale: %v", err)
	}
	// A member needing bigger blocks.
	cfg := a.cfg
	cfg.Events, cfg.BlockSize = 2, 4096
	if _, _, err := Load(cfg, a.areas, Options{}); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "1024-byte blocks but the members need 4096-byte blocks") {
		t.Fatalf("block size: %v", err)
	}
	// The array size changed.
	cfg = a.cfg
	cfg.Events, cfg.ArraySectors = 2, cfg.ArraySectors+MinRegionSectors
	if _, _, err := Load(cfg, a.areas, Options{}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("size: %v", err)
	}
}

// --assume-clean: everything clean, nothing to sync, writes wait once.
func TestAssumeClean(t *testing.T) {
	b, a := newTestBitmap(t, 600, 512, 2, InitClean, Options{})
	if len(b.DirtyRegions(nil)) != 0 || !b.Written(0) {
		t.Fatal("assume-clean states")
	}
	_, info, err := a.load(t, 1)
	if err != nil || info.Clean != 600 {
		t.Fatalf("%v %+v", err, info)
	}
}

// The header waits for every block of a rewrite; events are carried by
// the batch.
func TestSetEventsAndRewrite(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{})
	b.StartWrite(1, 1, 1)
	busy := b.Prepare() // block 1 in flight
	b.RewriteAll()
	b.SetEvents(5)
	bt := b.Prepare()
	if bt == nil || len(bt.Blocks) != 2 || bt.Blocks[0].Index != 2 || bt.Blocks[1].Index != 3 || bt.Events != 0 {
		t.Fatalf("batch %+v, want blocks 2 and 3", bt)
	}
	var rel []Waiter
	a.commit(b, bt, &rel)
	if b.Prepare() != nil {
		t.Fatal("header before block 1's rewrite")
	}
	a.commit(b, busy, &rel)
	bt = b.Prepare()
	if bt == nil || len(bt.Blocks) != 1 || bt.Blocks[0].Index != 1 {
		t.Fatalf("batch %+v, want block 1", bt)
	}
	a.commit(b, bt, &rel)
	bt = b.Prepare()
	if bt == nil || len(bt.Blocks) != 1 || bt.Blocks[0].Index != 0 || bt.Events != 5 {
		t.Fatalf("batch %+v, want the header", bt)
	}
	a.commit(b, bt, &rel)
	if b.Stats().DurableEvents != 5 || b.HasWork() {
		t.Fatalf("stats %+v", b.Stats())
	}
}

func TestNotify(t *testing.T) {
	n := 0
	b, a := newTestBitmap(t, 100, 512, 1, InitNeverWritten, Options{Notify: func() { n++ }})
	b.StartWrite(1, 1, 1)
	b.StartWrite(2, 2, 2)
	b.StartWrite(1, 1, 3)
	if n != 1 {
		t.Fatalf("%d notifications, want 1", n)
	}
	a.flush(t, b)
	b.StartWrite(3, 3, 4)
	if n != 2 {
		t.Fatalf("%d notifications, want 2", n)
	}
}

func TestMisuse(t *testing.T) {
	b, _ := newTestBitmap(t, 100, 512, 1, InitClean, Options{})
	for name, f := range map[string]func(){
		"end without start": func() { b.EndWrite(1, 1) },
		"range":             func() { b.StartWrite(5, 100, 0) },
		"reversed":          func() { b.StartWrite(5, 4, 0) },
		"member":            func() { b.SetMissing(64, true) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	if _, err := Create(testConfig(t, 10, 512), InitClean, Options{ClearDelay: time.Minute, MaxClearDelay: time.Second}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("max delay below delay: %v", err)
	}
}

func TestRegions(t *testing.T) {
	b, _ := newTestBitmap(t, 100, 512, 1, InitClean, Options{})
	for _, tc := range []struct {
		sector, count uint64
		first, last   int
	}{{0, 1, 0, 0}, {127, 1, 0, 0}, {127, 2, 0, 1}, {128, 128, 1, 1}, {100, 300, 0, 3}} {
		if f, l := b.Regions(tc.sector, tc.count); f != tc.first || l != tc.last {
			t.Errorf("Regions(%d, %d) = %d, %d", tc.sector, tc.count, f, l)
		}
	}
}

func TestHistogram(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{0, time.Microsecond, 1500 * time.Nanosecond, time.Millisecond, time.Hour} {
		h.Observe(d)
	}
	s := h.Snapshot()
	if s.Counts[0] != 2 || s.Counts[1] != 1 || s.Counts[10] != 1 || s.Counts[HistogramBuckets-1] != 1 {
		t.Fatalf("counts %v", s.Counts)
	}
	if BucketBound(10) != 1024*time.Microsecond || BucketBound(HistogramBuckets-1) <= time.Hour {
		t.Fatal("bounds")
	}
	if n := testing.AllocsPerRun(100, func() { h.Observe(time.Millisecond) }); n != 0 {
		t.Fatalf("Observe allocates %v", n)
	}
}

// The hot path allocates nothing on durable-dirty regions.
func TestHotPathAllocs(t *testing.T) {
	b, a := newTestBitmap(t, 1000, 4096, 1, InitDirty, Options{})
	a.flush(t, b)
	n := testing.AllocsPerRun(1000, func() {
		if !b.StartWrite(10, 11, 1) {
			t.Fatal("waited")
		}
		b.EndWrite(10, 11)
	})
	if n != 0 {
		t.Fatalf("StartWrite+EndWrite allocate %v times", n)
	}
}

// Load takes the most cautious state of each region among the copies:
// dirty over clean over never written, whichever member holds it; a block
// valid on one member only is taken from it.
func TestLoadMergesMostCautious(t *testing.T) {
	cfg := testConfig(t, 3000, 1024)
	g, err := NewGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := newFakeArray(cfg, 3)
	images := [3][]byte{make([]byte, 3000), make([]byte, 3000), make([]byte, 3000)}
	set := func(r int, s ...State) {
		for m := range 3 {
			images[m][r] = byte(s[m])
		}
	}
	set(0, Dirty, Clean, NeverWritten)
	set(1, Clean, Dirty, Clean)
	set(2, NeverWritten, NeverWritten, Dirty)
	set(3, NeverWritten, Clean, NeverWritten)
	set(4, Clean, Clean, Clean)
	set(1500, Dirty, Clean, Clean) // block 2: only member 0's copy is valid
	set(1501, Clean, Dirty, Dirty)
	for m := range 3 {
		area := a.areas[m]
		EncodeHeader(area[g.Start-g.AreaOffset:], &g, 1, 1)
		for blk := 1; blk < g.Blocks(); blk++ {
			EncodeBlock(area[g.BlockOffset(blk)-g.AreaOffset:], &g, blk, uint64(10+m), images[m])
		}
		if m > 0 {
			area[g.BlockOffset(2)-g.AreaOffset+3] ^= 1 // torn
		}
	}
	b, info, err := Load(cfg, a.areas, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]State{0: Dirty, 1: Dirty, 2: Dirty, 3: Clean, 4: Clean, 5: NeverWritten, 1500: Dirty, 1501: Clean}
	for r, s := range want {
		if got := b.State(r); got != s {
			t.Errorf("region %d: %v, want %v", r, got, s)
		}
	}
	if info.Seq != 12 || len(info.Copies[1].BadBlocks) != 1 || len(info.Copies[2].BadBlocks) != 1 || len(info.Copies[0].BadBlocks) != 0 {
		t.Fatalf("info %+v", info)
	}
}

// The recheck under the lock in StartWrite's slow path: a commit between
// the atomic add (which saw the region not durable) and the lock must not
// leave the write waiting for a release that already happened.
func TestStartSlowRechecks(t *testing.T) {
	b, a := newTestBitmap(t, 100, 512, 1, InitClean, Options{})
	b.StartWrite(3, 3, 1)
	bt := b.Prepare()
	// Another queue thread's StartWrite(3, 3, 2) does its add now...
	if b.words[3].Add(1)&flagDurable != 0 {
		t.Fatal("durable before the commit")
	}
	var rel []Waiter
	a.commit(b, bt, &rel)
	// ... and takes the lock after the commit.
	if !b.startSlow(3, 3, 2) {
		t.Fatal("write left waiting after its region became durable")
	}
	if !slices.Equal(rel, []Waiter{1}) {
		t.Fatalf("released %v", rel)
	}
}

// Assemble falls back to every region dirty, keeping the header's
// geometry, with events above every header seen.
func TestAssembleFallback(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{})
	b.SetEvents(4) // (one update ahead of the superblocks' 3, as a header can be)
	a.flush(t, b)
	g := b.Geometry()
	for _, ar := range a.areas {
		ar[g.BlockOffset(1)-g.AreaOffset] ^= 1
	}
	cfg := a.cfg
	cfg.RegionSectors, cfg.BlockSize, cfg.Events = 0, 0, 3
	b2, info, err := Assemble(cfg, a.areas, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !info.AllDirty || !errors.Is(info.Err, ErrCorrupt) || b2.Geometry() != g || b2.Events() != 4 || len(b2.DirtyRegions(nil)) != 3000 {
		t.Fatalf("info %+v, events %d", info, b2.Events())
	}
	// Nothing readable: the default geometry.
	for _, ar := range a.areas {
		clear(ar)
	}
	cfg.BlockSize = 1024
	b3, info, err := Assemble(cfg, a.areas, Options{})
	if err != nil || !info.AllDirty || !errors.Is(info.Err, ErrNoBitmap) || b3.Geometry().RegionSectors != DefaultRegionSectors(cfg.ArraySectors) || b3.Geometry().BlockSize != 1024 {
		t.Fatalf("%v %+v", err, info)
	}
	// A default that does not fit the area: the next size that does.
	cfg.BlockSize = 0
	cfg.ArraySectors = 5000 * DefaultMinRegionSectors
	cfg.AreaBytes = 4096 * 2
	b4, info, err := Assemble(cfg, [][]byte{make([]byte, cfg.AreaBytes)}, Options{})
	if err != nil || !info.AllDirty || b4.Geometry().BlockSize != 4096 || b4.Geometry().Regions > 4080 {
		t.Fatalf("%v %+v", err, info)
	}
}

// A batch that a member kept in sync failed (Failed): nothing it set is
// durable-dirty, the writes waiting for its regions come back as failed,
// the others keep waiting, and a later write to one of its regions waits
// for the block to be written again.
func TestFailedBatch(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 2, InitNeverWritten, Options{})
	if b.StartWrite(7, 8, 100) {
		t.Fatal("write to a never-written region did not wait")
	}
	bt := b.Prepare()
	if bt == nil {
		t.Fatal("no batch")
	}
	if b.StartWrite(2000, 2000, 101) { // another block, requested meanwhile
		t.Fatal("write to a never-written region did not wait")
	}
	a.write(0, bt.Blocks[0]) // member 0 took it, member 1 (kept) did not
	rel, failed := b.Failed(bt, nil, nil)
	if len(rel) != 0 || !slices.Equal(failed, []Waiter{100}) {
		t.Fatalf("released %v, failed %v: want none and [100]", rel, failed)
	}
	b.EndWrite(7, 8) // the failed write ends unissued
	if b.StartWrite(7, 7, 102) {
		t.Fatal("write to a region of the failed batch did not wait")
	}
	rel = a.flush(t, b)
	slices.Sort(rel)
	if !slices.Equal(rel, []Waiter{101, 102}) {
		t.Fatalf("released %v, want [101 102]", rel)
	}
	g := b.Geometry()
	for m := range 2 {
		if s := a.diskState(t, &g, m, 7); s != Dirty {
			t.Fatalf("member %d: region 7 is %v on disk after the retry", m, s)
		}
	}
	if !b.StartWrite(8, 8, 103) {
		t.Fatal("write to a region the retry made dirty waited")
	}
	for _, w := range [][2]int{{2000, 2000}, {7, 7}, {8, 8}} {
		b.EndWrite(w[0], w[1])
	}
}

// A never-written region's first write calls FirstWrite once; MarkFill
// keeps the region from being cleared until ResyncDone, without
// redirecting reads (CopiesDiffer), and a clean region's next write is no
// first write.
func TestFirstWriteFill(t *testing.T) {
	const d = 5 * time.Second
	var b *Bitmap
	var first []int
	opts := Options{ClearDelay: d, MaxClearDelay: d, FirstWrite: func(r int) {
		first = append(first, r)
		b.MarkFill(r, r)
	}}
	b, a := newTestBitmap(t, 100, 512, 1, InitNeverWritten, opts)
	a.tick(t, b, 0)
	b.StartWrite(1, 2, 1)
	b.StartWrite(2, 3, 2)
	a.flush(t, b)
	b.EndWrite(1, 2)
	b.EndWrite(2, 3)
	if !slices.Equal(first, []int{1, 2, 3}) {
		t.Fatalf("FirstWrite calls %v, want [1 2 3]", first)
	}
	for r := 1; r <= 3; r++ {
		if !b.Written(r) || !b.NeedsSync(r) || b.CopiesDiffer(r) || !b.Dirty(r) {
			t.Fatalf("region %d: written %v needs sync %v copies differ %v dirty %v", r, b.Written(r), b.NeedsSync(r), b.CopiesDiffer(r), b.Dirty(r))
		}
	}
	if b.NeedsSync(0) || b.NeedsSync(4) {
		t.Fatal("an unwritten region needs sync")
	}
	a.tick(t, b, time.Hour)
	a.tick(t, b, 2*time.Hour)
	for r := 1; r <= 3; r++ {
		if b.State(r) != Dirty {
			t.Fatalf("region %d cleared before its fill was synced", r)
		}
	}
	b.ResyncDone(1, 2)
	a.tick(t, b, 3*time.Hour)
	a.tick(t, b, 4*time.Hour)
	if b.State(1) != Clean || b.State(2) != Clean || b.State(3) != Dirty {
		t.Fatalf("after the resync of 1..2: states %v %v %v, want clean clean dirty", b.State(1), b.State(2), b.State(3))
	}
	b.StartWrite(1, 1, 3)
	a.flush(t, b)
	b.EndWrite(1, 1)
	if len(first) != 3 || b.NeedsSync(1) {
		t.Fatalf("a clean region's write counted as a first write (%v, needs sync %v)", first, b.NeedsSync(1))
	}
}
