package array

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// parityGarbageArray creates a parity array with the bitmap over members
// full of garbage (as used devices are), serves writes over [0, span) in
// full through a queue (first writes: the resync they kick runs
// meanwhile) and returns it with its queue and the reference data.
func parityGarbageArray(t *testing.T, rng *rand.Rand, level engine.Level, members int, span uint64) (*Array, []string, *queue, *pRing, []byte, *uint64) {
	t.Helper()
	paths := memberFiles(t, members, 16<<20)
	for _, p := range paths {
		b := make([]byte, 16<<20)
		rng.Read(b[8192:])
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := Open(paths, CreateSpec{Level: level, ParityLayout: engine.LeftSymmetric, ChunkSectors: 16, RegionSectors: 128,
		BitmapOptions: bitmap.Options{ClearDelay: 20 * time.Millisecond, MaxClearDelay: 20 * time.Millisecond}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	ref := make([]byte, a.Engine.Parity.ArraySectors()<<9)
	id := new(uint64)
	for s := uint64(0); s < span; s += 64 {
		*id++
		buf := pageBuf(64 << 9)
		fillSectors(buf, *id)
		delete(r.done, 0)
		h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: s, Sectors: 64, Buf: buf})
		pServe(t, rng, h, r, []uint16{0})
		if err := r.done[0]; err != nil {
			t.Fatal(err)
		}
		copy(ref[s<<9:], buf)
	}
	return a, paths, h, r, ref, id
}

// pWhileSync runs batches on the queue until the background job (and
// those it hands on to) ends.
func pWhileSync(t *testing.T, rng *rand.Rand, a *Array, h *queue, r *pRing, ref []byte, span uint64, id *uint64) int {
	t.Helper()
	ended := make(chan struct{})
	go func() { a.WaitSync(); close(ended) }()
	for n := 0; ; n++ {
		select {
		case <-ended:
			return n
		default:
		}
		pBatch(t, rng, h, r, ref, span, id)
	}
}

// pCorrupt flips a byte of the P chunk of stripe s on its member.
func pCorrupt(t *testing.T, a *Array, s uint64, at uint64) {
	t.Helper()
	g := *a.Engine.Parity
	b := pageBuf(512)
	off := int64(a.dataOffset + (s*g.ChunkSectors+at/512)<<9)
	m := a.Members[g.Stripe(s).P]
	if err := m.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[at%512] ^= 0x40
	if err := m.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// The syncer schedules a parity array's resync: the regions a first
// write filled are resynced in the background while the queue writes to
// the same stripes, then trusted; after a crash only the regions the
// bitmap had dirty are resynced at assembly (a P made wrong there is
// rewritten, one in a clean region is not, and a check then counts it);
// the data reads back throughout.
func TestParityResyncScheduled(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6} {
		t.Run(level.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(level)))
			const span = 4096
			a, paths, h, r, ref, id := parityGarbageArray(t, rng, level, 5, span)
			defer func() { a.Close() }()
			batches := pWhileSync(t, rng, a, h, r, ref, span, id)
			g := *a.Engine.Parity
			rs := a.Bitmap.Geometry().RegionSectors
			first, last := a.Bitmap.Regions(0, span)
			if s := a.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
				t.Fatalf("after the first writes (%d batches during the resync): %+v", batches, s)
			}
			for reg := first; reg <= last; reg++ {
				if a.Bitmap.NeedsSync(reg) {
					t.Fatalf("region %d still needs sync", reg)
				}
			}
			pConsistent(t, a, uint64(last+1)*rs)
			if a.parityUntrusted(0) {
				t.Fatal("stripe 0 untrusted after the resync")
			}
			// A crash while regions 2-3 are dirty: a torn write left a
			// P wrong there, and one in region 10 (clean) is wrong too.
			per := g.ChunkSectors * uint64(g.DataMembers())
			dirtyStripe, cleanStripe := 2*rs/per+1, 10*rs/per+1
			for deadline := time.Now().Add(10 * time.Second); a.Bitmap.Dirty(10); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("region 10 never cleared")
				}
			}
			for !a.Bitmap.StartWrite(2, 3, 0) {
				a.fl.do(func() {})
			}
			a.fl.do(func() {})
			// The writes' log entries are dead (as the checkpointer
			// makes them, in its time): they replay nothing.
			persistLogCheckpoint(t, a)
			pCorrupt(t, a, dirtyStripe, 1000)
			pCorrupt(t, a, cleanStripe, 3000)
			a.Close() // the write never ended
			a, err := Open(paths, CreateSpec{Level: -1}, false)
			if err != nil {
				t.Fatal(err)
			}
			for reg := first; reg <= last; reg++ {
				if (reg == 2 || reg == 3 || reg == 10) && a.Bitmap.NeedsSync(reg) != (reg != 10) {
					t.Fatalf("assembled after the crash: region %d needs sync %v", reg, a.Bitmap.NeedsSync(reg))
				}
			}
			r = &pRing{done: map[uint16]error{}}
			h = a.newQueue(r)
			a.StartBackground()
			// (No writes meanwhile: they could rewrite the wrong P.)
			a.WaitSync()
			if s := a.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
				t.Fatalf("after the crash's resync: %+v", s)
			}
			if a.parityUntrusted(dirtyStripe) {
				t.Fatal("the dirty regions are not trusted after their resync")
			}
			pConsistent(t, a, 10*rs) // stripe 2*rs/per+1 rewritten
			if err := a.Check(false); err != nil {
				t.Fatal(err)
			}
			a.WaitSync()
			if s := a.SyncStatus(); s.LastCheck != "check" || s.LastCheckResult != "ok" || s.MismatchCnt != 8 { // one row: md counts sectors
				t.Fatalf("check after the crash's resync (the clean region's P wrong): %+v", s)
			}
			pReadAll(t, rng, h, r, ref, span)
		})
	}
}

// check and repair of a parity array: check counts the 4 KiB rows whose
// parity is wrong (here one P row, and for raid6 one Q row) and writes
// nothing, while the queue writes to the same stripes; repair rewrites
// them; a check then finds none; never-written and untrusted stripes are
// not checked (their parity is garbage by design); with as many members
// lost as the parity covers both are refused.
func TestParityCheckRepair(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6} {
		t.Run(level.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(level) + 10))
			const span = 2048
			a, paths, h, r, ref, id := parityGarbageArray(t, rng, level, 6, span)
			defer a.Close()
			pWhileSync(t, rng, a, h, r, ref, span, id)
			if err := a.Check(false); err != nil {
				t.Fatal(err)
			}
			pWhileSync(t, rng, a, h, r, ref, span, id)
			if s := a.SyncStatus(); s.LastCheck != "check" || s.LastCheckResult != "ok" || s.MismatchCnt != 0 {
				t.Fatalf("check of a resynced array, the garbage beyond %d sectors never written: %+v", span, s)
			}
			g := *a.Engine.Parity
			want := uint64(1)
			pCorrupt(t, a, 3, 100)
			if level == engine.Level6 {
				// Q of stripe 7, its second 4 KiB row.
				b := pageBuf(512)
				off := int64(a.dataOffset + (7*g.ChunkSectors+8)<<9)
				m := a.Members[g.Stripe(7).Q]
				if err := m.ReadAt(b, off); err != nil {
					t.Fatal(err)
				}
				b[9] ^= 1
				if err := m.WriteAt(b, off); err != nil {
					t.Fatal(err)
				}
				want++
			}
			per := g.ChunkSectors * uint64(g.DataMembers())
			if span%per != 0 {
				// The stripe across the end of the written regions also
				// touches a never-written one: untrusted, not checked
				// (its P made wrong is not counted).
				pCorrupt(t, a, span/per, 700)
			}
			before := fileBytes(t, paths...)
			if err := a.Check(false); err != nil {
				t.Fatal(err)
			}
			a.WaitSync()
			if s := a.SyncStatus(); s.LastCheck != "check" || s.MismatchCnt != 8*want {
				t.Fatalf("check of %d wrong rows: %+v", want, s)
			}
			for i, b := range fileBytes(t, paths...) {
				if !bytes.Equal(b[a.dataOffset:], before[i][a.dataOffset:]) {
					t.Fatalf("check wrote member %d", i)
				}
			}
			if err := a.Check(true); err != nil {
				t.Fatal(err)
			}
			a.WaitSync() // (writes meanwhile could rewrite the wrong rows first)
			if s := a.SyncStatus(); s.LastCheck != "repair" || s.LastCheckResult != "ok" || s.MismatchCnt != 8*want {
				t.Fatalf("repair of %d wrong rows: %+v", want, s)
			}
			if err := a.Check(false); err != nil {
				t.Fatal(err)
			}
			a.WaitSync()
			if s := a.SyncStatus(); s.MismatchCnt != 0 {
				t.Fatalf("check after repair: %+v", s)
			}
			pConsistent(t, a, span-span%per)
			// As many members lost as the parity covers (raid5: one,
			// raid6: two): refused, as md does.
			lose := []int{2}
			if level == engine.Level6 {
				lose = append(lose, 3)
			}
			for _, m := range lose {
				r.failOn = func(io engine.MemberIO) bool { return int(io.Member) == m && io.Kind == engine.IOWrite }
				for a.Engine.State().Members[m].State == engine.MemberActive {
					pBatch(t, rng, h, r, ref, span, id)
				}
			}
			r.failOn = nil
			for _, repair := range []bool{false, true} {
				if err := a.Check(repair); !errors.Is(err, resync.ErrDegraded) {
					t.Fatalf("check (repair %v) of a degraded array: %v", repair, err)
				}
			}
			pReadAll(t, rng, h, r, ref, span)
		})
	}
}

// A resync the queue's requests hold a stripe of waits for them: a write
// whose member operations are not delivered keeps the resync out of its
// stripe until it completes; the resync then takes it.
func TestParityResyncWaitsForStripe(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	a, _, h, r, ref, id := parityGarbageArray(t, rng, engine.Level5, 4, 512)
	defer a.Close()
	pWhileSync(t, rng, a, h, r, ref, 512, id)
	// Region 0 made to need a resync again (as a crash leaves it).
	a.Bitmap.MarkNeedsSync(0, 0)
	held := pageBuf(8 << 9)
	*id++
	fillSectors(held, *id)
	delete(r.done, 0)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 8, Sectors: 8, Buf: held})
	for deadline := time.Now().Add(5 * time.Second); len(r.pending) == 0; time.Sleep(time.Millisecond) {
		if r.woke.Swap(false) {
			h.OnWake()
		}
		if time.Now().After(deadline) {
			t.Fatal("the write never issued anything")
		}
	}
	if !a.startResync() {
		t.Fatal("no resync started")
	}
	time.Sleep(200 * time.Millisecond)
	if s := a.SyncStatus(); s.Action != "resync" {
		t.Fatalf("the resync of a stripe a write holds went ahead: %+v", s)
	}
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}
	copy(ref[8<<9:], held)
	ended := make(chan struct{})
	go func() { a.WaitSync(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the resync never got the stripe the write released")
	}
	if s := a.SyncStatus(); s.LastResult != "ok" || a.Bitmap.NeedsSync(0) {
		t.Fatalf("after the resync: %+v", s)
	}
	pConsistent(t, a, 512)
	pReadAll(t, rng, h, r, ref, 512)
}

// garbageFiles makes n member files full of garbage past their
// superblock area.
func garbageFiles(t *testing.T, rng *rand.Rand, n int) []string {
	t.Helper()
	paths := memberFiles(t, n, 16<<20)
	for _, p := range paths {
		b := make([]byte, 16<<20)
		rng.Read(b[8192:])
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// A parity array without the write-intent bitmap has its parity built in
// full, as md does: created over garbage, the initial resync runs while
// the queue writes, then every stripe is consistent and a check finds
// nothing; stopped uncleanly, the next assembly resyncs it in full again.
// Before the resync passes a stripe its parity is untrusted: with the
// syncer stopped (the resync never gets there), writes over garbage
// parity and then a member lost still read back right (and do not
// without the rule).
func TestParityNoBitmapFullResync(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6} {
		t.Run(level.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(level) + 20))
			spec := CreateSpec{Level: level, ParityLayout: engine.RightSymmetric, ChunkSectors: 16, NoBitmap: true,
				SyncMinBytes: 1 << 30} // (no back-off for the queue: the test writes throughout)
			const span = 2048
			// The rule: no resync, writes, a member lost.
			a, err := Open(garbageFiles(t, rng, 5), spec, true)
			if err != nil {
				t.Fatal(err)
			}
			a.StopSync()
			r := &pRing{done: map[uint16]error{}}
			h := a.newQueue(r)
			ref := make([]byte, a.Engine.Parity.ArraySectors()<<9)
			var id uint64
			// Half a chunk at a time: over trusted parity each would be
			// an RMW (one data chunk of three or four), carrying the
			// garbage on.
			pWriteSpan(t, rng, h, r, ref, span, 8, &id)
			for range 20 {
				pBatch(t, rng, h, r, ref, span, &id)
			}
			if !a.SyncStatus().ResyncNeeded {
				t.Fatal("a new array without a bitmap does not need its parity built")
			}
			r.failOn = func(io engine.MemberIO) bool { return io.Member == 1 && io.Kind == engine.IOWrite }
			for a.Engine.State().Members[1].State == engine.MemberActive {
				pBatch(t, rng, h, r, ref, span, &id)
			}
			r.failOn = nil
			pReadAll(t, rng, h, r, ref, span)
			a.Close()

			// The initial build, while the queue writes.
			paths := garbageFiles(t, rng, 5)
			a, err = Open(paths, spec, true)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { a.Close() }()
			if err := a.SetClean(false); err != nil {
				t.Fatal(err)
			}
			r = &pRing{done: map[uint16]error{}}
			h = a.newQueue(r)
			a.StartBackground()
			pWriteSpan(t, rng, h, r, ref, span, 64, &id)
			pWhileSync(t, rng, a, h, r, ref, span, &id)
			g := *a.Engine.Parity
			if s := a.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
				t.Fatalf("after the initial build: %+v", s)
			}
			pConsistent(t, a, g.ArraySectors())
			if err := a.Check(false); err != nil {
				t.Fatal(err)
			}
			a.WaitSync()
			if s := a.SyncStatus(); s.LastCheckResult != "ok" || s.MismatchCnt != 0 {
				t.Fatalf("check after the initial build: %+v", s)
			}
			// Stopped uncleanly with a P wrong: resynced in full.
			for range 10 {
				pBatch(t, rng, h, r, ref, span, &id)
			}
			pCorrupt(t, a, g.Stripes()-1, 5)
			a.Close()
			a, err = Open(paths, CreateSpec{Level: -1}, false)
			if err != nil {
				t.Fatal(err)
			}
			if !a.SyncStatus().ResyncNeeded {
				t.Fatal("assembled after an unclean stop: no resync needed")
			}
			r = &pRing{done: map[uint16]error{}}
			h = a.newQueue(r)
			a.StartBackground()
			a.WaitSync()
			if s := a.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
				t.Fatalf("after the unclean stop's resync: %+v", s)
			}
			pConsistent(t, a, g.ArraySectors())
			pReadAll(t, rng, h, r, ref, span)
		})
	}
}

// pWriteSpan writes [0, span) in full, in writes of n sectors, so that
// every read there has one right answer.
func pWriteSpan(t *testing.T, rng *rand.Rand, h *queue, r *pRing, ref []byte, span, n uint64, id *uint64) {
	t.Helper()
	pWriteRange(t, rng, h, r, ref, 0, span, n, id)
}

// pWriteRange is pWriteSpan over [from, span).
func pWriteRange(t *testing.T, rng *rand.Rand, h *queue, r *pRing, ref []byte, from, span, n uint64, id *uint64) {
	t.Helper()
	for s := from; s < span; s += n {
		*id++
		buf := pageBuf(int(n) << 9)
		fillSectors(buf, *id)
		delete(r.done, 0)
		h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: s, Sectors: uint32(n), Buf: buf})
		pServe(t, rng, h, r, []uint16{0})
		if err := r.done[0]; err != nil {
			t.Fatal(err)
		}
		copy(ref[s<<9:], buf)
	}
}
