package array

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// pauseClock is a resync.Clock whose Now blocks once the syncer's
// position reaches a chosen value: the point in Run's loop after a step
// was decided (and done, or skipped) and before its Progress moves the
// targets' RebuildOffset (report calls Now first).
type pauseClock struct {
	mu      sync.Mutex
	s       *resync.Syncer
	at      uint64 // pause when the position is this (0: never)
	reached chan struct{}
	release chan struct{}
}

func (c *pauseClock) Now() time.Time {
	c.mu.Lock()
	s, at := c.s, c.at
	var reached, release chan struct{}
	if s != nil && at != 0 {
		if done, _ := s.Progress(); done == at {
			c.at = 0
			reached, release = c.reached, c.release
		}
	}
	c.mu.Unlock()
	if reached != nil {
		close(reached)
		<-release
	}
	return time.Now()
}

func (c *pauseClock) Sleep(ctx context.Context, d time.Duration) error {
	return realClock{}.Sleep(ctx, d)
}

type realClock struct{}

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// arm makes the next Now at position at block; it returns the channel
// closed when it does and the one that lets it go on.
func (c *pauseClock) arm(at uint64) (reached, release chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.reached, c.release = at, make(chan struct{}), make(chan struct{})
	return c.reached, c.release
}

// A raid6 rebuild onto a new device (old contents: garbage) decides that
// a stripe in a never-written bitmap region needs nothing (Need:
// neededWritten) without the stripe lock. A user write that lands in that
// stripe after the decision, and before the rebuild's Progress moves the
// target's RebuildOffset past the stripe, is planned with the target
// unreadable there: the target's chunk (not written by the request) is
// taken as what the parity says (Reconstruct) and not written; the
// rebuild then reports the stripe rebuilt. The target's real chunk is the
// device's garbage, so the stripe's parity no longer matches its data,
// and when the member holding the acknowledged write fails, it is
// reconstructed wrong. (Found by review; fixed by writing a rebuilding
// member's rebuilt rows in a Reconstruct write, as md writes every
// member not faulty: engine.planSegment.)
func TestParityRebuildSkipRacesFirstWrite(t *testing.T) { parityRebuildSkipRace(t, 1) }

// The control: the same write made while the rebuild is paused just
// before it decides on stripe s (Need sees the region written) leaves the
// stripe consistent and the data readable.
func TestParityRebuildSkipRaceControl(t *testing.T) { parityRebuildSkipRace(t, 0) }

func parityRebuildSkipRace(t *testing.T, after uint64) {
	rng := rand.New(rand.NewSource(7))
	paths := memberFiles(t, 5, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level6, ParityLayout: engine.LeftSymmetric, ChunkSectors: 16, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Close() }()
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	g := *a.Engine.Parity
	cs := g.ChunkSectors
	per := cs * uint64(g.DataMembers())
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	ref := make([]byte, g.ArraySectors()<<9)
	var id uint64
	// Some data at the start (the rebuild copies it).
	for range 5 {
		pBatch(t, rng, h, r, ref, 1024, &id)
	}
	a.WaitSync()

	const target = 1
	// A stripe in a never-written region where the target holds data
	// the write below does not cover.
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
	a.sync.s = resync.New(a.Engine, &stripeBarrier{a: a}, newMemberIO(a), resync.Config{Clock: pc})
	pc.mu.Lock()
	pc.s = a.sync.s
	pc.mu.Unlock()
	reached1, release1 := pc.arm((s + after) * cs) // after stripe s's step (skipped), before its Progress
	released := false
	defer func() {
		if !released {
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
		// A used disk: whatever it held before.
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
	if st := a.Engine.State().Members[target]; st.State != engine.MemberRebuilding || st.RebuildOffset > (s-1+after)*cs {
		t.Fatalf("target: %+v", st)
	}

	// The user's write: a whole chunk of the victim's in stripe s.
	m := g.Stripe(s)
	sector := s*per + uint64(m.Slot[victim])*cs
	buf := pageBuf(int(cs) << 9)
	id++
	fillSectors(buf, id)
	delete(r.done, 0)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: sector, Sectors: uint32(cs), Buf: buf})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}
	copy(ref[sector<<9:], buf)

	// The rebuild goes on past the stripe; stopped again a little later,
	// before it ends (its end starts the resync of the filled region).
	reached2, release2 := pc.arm((s + 4) * cs)
	close(release1)
	released = true
	defer close(release2)
	select {
	case <-reached2:
	case <-time.After(20 * time.Second):
		t.Fatalf("the rebuild never reached stripe %d: %+v", s+3, a.SyncStatus())
	}
	if st := a.Engine.State().Members[target]; st.State != engine.MemberRebuilding || st.RebuildOffset < (s+1)*cs {
		t.Fatalf("target: %+v", st)
	}

	// The stripe as the members hold it: is its parity that of its data?
	consistent := func() bool {
		par, _ := engine.NewParity(g.DataMembers(), true)
		cb := int(cs << 9)
		chunks := make([][]byte, g.Members)
		for mem := range g.Members {
			chunks[mem] = pageBuf(cb)
			if err := a.Members[mem].ReadAt(chunks[mem], int64(a.dataOffset+s*cs<<9)); err != nil {
				t.Fatal(err)
			}
		}
		data := make([][]byte, g.DataMembers())
		for mem := range g.Members {
			if sl := m.Slot[mem]; sl >= 0 {
				data[sl] = chunks[mem]
			}
		}
		want := [][]byte{make([]byte, cb), make([]byte, cb)}
		if err := par.Compute(data, want); err != nil {
			t.Fatal(err)
		}
		return bytes.Equal(want[0], chunks[m.P]) && bytes.Equal(want[1], chunks[m.Q])
	}
	incons := !consistent()

	// The member holding the acknowledged write fails: its chunk is
	// read through the parity and the rebuilt target.
	if err := pDo(h, r, func() error { return a.Fail(victim) }); err != nil {
		t.Fatal(err)
	}
	got := pageBuf(int(cs) << 9)
	delete(r.done, 0)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: sector, Sectors: uint32(cs), Buf: got})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}
	if incons || !bytes.Equal(got, buf) {
		t.Errorf("stripe %d (region %d never written when the rebuild reached it): target %d rebuilt past it (offset %d); parity consistent with the members' data: %v; the write to member %d's chunk (array sector %d) reads back right with that member failed: %v",
			s, reg, target, a.Engine.State().Members[target].RebuildOffset, !incons, victim, sector, bytes.Equal(got, buf))
	}
}
