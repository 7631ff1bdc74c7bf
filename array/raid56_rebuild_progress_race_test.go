package array

import (
	"bytes"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// The rebuild skip race (TestParityRebuildSkipRacesFirstWrite), with the
// write to the TARGET's own chunk: planned with the target unreadable at
// the stripe, its entry puts the target's slot in X with its new data
// (logPrepare, from r.planSt). The rebuild's Progress then moves the
// target's offset past the stripe (no stripe lock: it skipped it) after
// readabilityMoved looked (end of the pre-reads) and before the target's
// data write lands; the offset is recorded in the superblocks; power cut.
// The assembly finds the target readable at the stripe, holding its old
// rows, and the replay writes a parity for its new ones: a member lost
// next (holding an acknowledged write) rebuilds wrong. Found by review;
// the rebuild's Progress now moves the offset under the stripes it passes,
// after the writes out on them.
func TestParityRebuildProgressWaitsForTargetWrite(t *testing.T) { parityProgressRace(t, false) }

// Control: the target's data write lands before the power cut.
func TestParityRebuildProgressTargetWriteLanded(t *testing.T) { parityProgressRace(t, true) }

func parityProgressRace(t *testing.T, landT bool) {
	rng := rand.New(rand.NewSource(7))
	paths := memberFiles(t, 5, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level6, ParityLayout: engine.LeftSymmetric, ChunkSectors: 16, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			a.Close()
		}
	}()
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	a.logCheckpointEvery = time.Hour
	g := *a.Engine.Parity
	cs := g.ChunkSectors
	per := cs * uint64(g.DataMembers())
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	ref := make([]byte, g.ArraySectors()<<9)
	var id uint64
	for range 5 {
		pBatch(t, rng, h, r, ref, 1024, &id)
	}
	a.WaitSync()

	const target = 1
	var s uint64
	var victim int
	for s = 2560/per + 1; ; s++ {
		m := g.Stripe(s)
		if m.Slot[target] < 0 {
			continue
		}
		victim = -1
		for mem := range g.Members {
			if mem != target && m.Slot[mem] >= 0 {
				victim = mem
				break
			}
		}
		break
	}
	reg, last := a.Bitmap.Regions(s*per, per)
	if reg != last || a.Bitmap.Written(reg) {
		t.Fatalf("stripe %d: regions %d..%d, written %v", s, reg, last, a.Bitmap.Written(reg))
	}

	pc := &pauseClock{}
	a.sync.s = resync.New(a.Engine, &stripeBarrier{a: a}, newMemberIO(a), resync.Config{Clock: pc, FlushInterval: time.Nanosecond})
	pc.mu.Lock()
	pc.s = a.sync.s
	pc.mu.Unlock()
	reached1, release1 := pc.arm((s + 1) * cs) // stripe s skipped, before its Progress
	released1 := false
	defer func() {
		if !released1 {
			close(release1)
		}
	}()
	if err := pDo(h, r, func() error { return a.Fail(target) }); err != nil {
		t.Fatal(err)
	}
	if err := pDo(h, r, func() error { return a.Remove(target) }); err != nil {
		t.Fatal(err)
	}
	fresh := memberFiles(t, 1, 16<<20)[0]
	{
		b := make([]byte, 16<<20)
		rng.Read(b[8192:])
		if err := os.WriteFile(fresh, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := pDo(h, r, func() error { return a.Replace(target, fresh) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached1:
	case <-time.After(20 * time.Second):
		t.Fatalf("the rebuild never reached stripe %d: %+v", s, a.SyncStatus())
	}
	if st := a.Engine.State().Members[target]; st.State != engine.MemberRebuilding || st.RebuildOffset > s*cs {
		t.Fatalf("target: %+v", st)
	}
	m := g.Stripe(s)
	// W0: the victim's chunk, acknowledged.
	vSector := s*per + uint64(m.Slot[victim])*cs
	vBuf := pageBuf(int(cs) << 9)
	id++
	fillSectors(vBuf, id)
	delete(r.done, 0)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: vSector, Sectors: uint32(cs), Buf: vBuf})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}

	// W1: the target's chunk. Everything but its data write to the
	// target goes through.
	tSector := s*per + uint64(m.Slot[target])*cs
	tBuf := pageBuf(int(cs) << 9)
	id++
	fillSectors(tBuf, id)
	delete(r.done, 0)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: tSector, Sectors: uint32(cs), Buf: tBuf})
	isT := func(o pRingOp) bool { return o.io.Kind == engine.IOWrite && !o.io.Log && int(o.io.Member) == target }
	sawT, sawLog := false, false
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		did := false
		for i, o := range r.pending {
			if isT(o) {
				sawT = true
				if !landT {
					continue
				}
			}
			sawLog = sawLog || o.io.Log
			r.deliver(h, i)
			did = true
			break
		}
		if !did && r.woke.Swap(false) {
			h.OnWake()
			did = true
		}
		if sawT && !did || landT && sawT && len(r.pending) == 0 {
			break
		}
		if !did {
			time.Sleep(50 * time.Microsecond)
		}
	}
	if !sawT || !sawLog {
		t.Fatalf("target write %v, log %v", sawT, sawLog)
	}
	// The rebuild moves on past the stripe.
	reached2, release2 := pc.arm((s + 8) * cs)
	close(release1)
	released1 = true
	passed := false
	select {
	case <-reached2:
		passed = true
	case <-time.After(2 * time.Second):
		// The rebuild's Progress waits for the stripes it passes: W1,
		// out, holds stripe s (the fix). The offset stays below it.
		if st := a.Engine.State().Members[target]; !landT && st.RebuildOffset > s*cs {
			t.Fatalf("the target's offset passed stripe %d while a write planned around it was out: %+v", s, st)
		}
	}
	if !landT && passed {
		t.Errorf("the rebuild passed stripe %d while W1, planned with the target unreadable there, was out", s)
	}
	a.mu.Lock()
	cp := a.checkpoint[target]
	var werr error
	if cp >= (s+1)*cs {
		werr = a.writeSuperblocks(a.Engine.State(), false)
	}
	a.mu.Unlock()
	if werr != nil {
		t.Fatal(werr)
	}
	snap := powerCutCopy(t, paths[:target])
	snapT := powerCutCopy(t, []string{fresh})
	snapRest := powerCutCopy(t, paths[target+1:])
	all := append(append(append([]string(nil), snap...), snapT...), snapRest...)
	close(release2)
	pServe(t, rng, h, r, []uint16{0})
	a.Close()
	closed = true

	b, err := Open(all, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t.Logf("warnings: %q; target %+v", b.Warnings, b.Engine.State().Members[target])
	b.StopSync()
	if err := b.Fail(victim); err != nil {
		t.Fatal(err)
	}
	if got := pReadOne(t, rng, b, vSector, cs); !bytes.Equal(got, vBuf) {
		t.Fatalf("victim %d's acknowledged chunk (stripe %d) reads back wrong with the victim lost after the crash (target %d rebuilt past the stripe on disk)", victim, s, target)
	}
}
