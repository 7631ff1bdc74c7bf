package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review. A raid10 member kept as the last copy of some chunks has a write given
// up on it after the member timeout: until that write returns, the member
// is fenced, and a read of another chunk planned on it gets EAGAIN and is
// served by the other copy. That member did not fail the read (its copy
// is as good as the other), yet the executor reports its copy for read
// repair: the repair worker raises the write barrier over the range and
// then waits, up to the member timeout, for the given-up write to return
// before it can rewrite the copy (memberIO.do). Meanwhile every queue's
// writes to the range are held, for a read error that never happened
// (and once per read that meets the busy member).
func TestReviewMerrBusyReadRepairHoldsWrites(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 128, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	g := a.Engine.Geo
	// only: a chunk whose one writable copy is on member 0 (the other on
	// member 2, failed); both: a chunk on members 0 and 1.
	var only, both uint64 = ^uint64(0), ^uint64(0)
	for s := uint64(0); s < g.ArraySectors() && (only == ^uint64(0) || both == ^uint64(0)); s += g.ChunkSectors {
		var locs [engine.MaxCopies]engine.Location
		var mask uint64
		for _, l := range g.Locate(s, locs[:0]) {
			mask |= 1 << uint(l.Member)
		}
		switch mask {
		case 1<<0 | 1<<2:
			only = s
		case 1<<0 | 1<<1:
			both = s
		}
	}
	if only == ^uint64(0) || both == ^uint64(0) {
		t.Fatalf("layout: no chunk found (only %d, both %d)", only, both)
	}
	a.MemberTimeout = 10 * time.Second
	a.WriteMostly = 1 << 1 // reads of the shared chunk go to member 0 first
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)

	// A write to the chunk member 0 alone holds hangs, and is given up:
	// member 0 is kept (last copy), fenced until the write returns.
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: only, Sectors: 8, Buf: make([]byte, 4096)})
	if len(r.pending) != 1 || r.pending[0].io.Member != 0 {
		t.Fatalf("write planned as %+v", r.pending)
	}
	hung := r.pending[0]
	r.pending = nil
	r.now = r.now.Add(11 * time.Second)
	h.OnTick()
	if err, ok := r.done[0]; !ok || err == nil {
		t.Fatalf("the hung write: done %v err %v (want an error)", ok, err)
	}
	if s := a.Engine.State().Members[0].State; s != engine.MemberActive {
		t.Fatalf("member 0, the last copy of some chunks, was failed: %v", s)
	}

	// A read of the shared chunk: member 0 is busy, member 1 answers.
	h.Handle(&ublk.Request{Tag: 1, Op: ublk.IOOpRead, Sector: both, Sectors: 8, Buf: make([]byte, 4096)})
	for len(r.pending) > 0 {
		o := r.pending[0]
		r.pending = r.pending[1:]
		h.OnCompletion(o.ud, int32(len(o.data)))
	}
	if err, ok := r.done[1]; !ok || err != nil {
		t.Fatalf("read of the shared chunk: done %v err %v", ok, err)
	}

	// Is a write to the range held by a read repair meanwhile?
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if !a.barrier.Enter(both, 8) {
			// The given-up write returns: the repair goes on, and
			// rewrites member 0's copy, which no read had failed.
			h.OnCompletion(hung.ud, 4096)
			for a.ReadRepairs() == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			t.Fatalf("a read that member 0 only answered EAGAIN (busy: a given-up write is out on it, no read error) was sent to read repair: the repair holds the write barrier over array sectors %d+8 while it waits up to the member timeout (%v) for member 0, and writes to the range wait with it; once the write returned, member 0's copy was rewritten (read repairs: %d)", both, a.MemberTimeout, a.ReadRepairs())
		}
		a.barrier.Exit(both, 8)
		time.Sleep(5 * time.Millisecond)
	}
	h.OnCompletion(hung.ud, 4096)
}
