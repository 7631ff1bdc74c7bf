package array

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// powerCutCopy copies the member files as they are now (the files are
// written O_DIRECT: this is what a power cut leaves) to a new directory.
func powerCutCopy(t *testing.T, paths []string) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		q := filepath.Join(dir, "c"+string(rune('0'+i)))
		if err := os.WriteFile(q, b, 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, q)
	}
	t.Cleanup(func() { forgetLate(out) })
	return out
}

// A raid5 write of one data chunk's rows (slot B, member d1) is planned
// with every member in sync. While its pre-reads are out, d1 is failed in
// memory (another queue's write to it failed, say); the failure's
// superblock update is not yet durable. The write's log entry is then
// prepared from the newer state: d1's slot goes into X with its NEW data
// (logPrepare's notInSync), while the write's data write to d1 is still
// issued (the plan's), and does not land. P's write lands. Power cut
// (before d1's failure is durable: the write was never acknowledged).
//
// At assembly d1 is in sync (nothing recorded its failure) and holds B's
// old rows. The replay sets P = L(X) with B's new data, so P no longer
// matches the data on disk. A member nobody wrote (d0) lost before the
// resync then reads back as old ^ Bnew ^ Bold: data not being written is
// corrupted. (Had the entry left d1 outside X, as planned, the replay
// would have read d1 as the crash left it, and P would match.) Found by
// review. Now the write sees that d1's readability moved since its plan
// and is planned again, held until d1's failure is durable: then d1 is
// left out of the write, and the power cut finds it failed.
func TestParityLogEntryFromPlanState(t *testing.T) {
	t.Run("member lost after assembly", func(t *testing.T) { parityLogPlanState(t, false) })
	t.Run("member missing at assembly", func(t *testing.T) { parityLogPlanState(t, true) })
}

func parityLogPlanState(t *testing.T, missing bool) {
	rng := rand.New(rand.NewSource(7))
	paths := memberFiles(t, 4, 16<<20)
	spec := CreateSpec{Level: engine.Level5, ChunkSectors: 16, RegionSectors: 128}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	g := *a.Engine.Parity
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	span := g.ChunkSectors * uint64(g.DataMembers()) * 4
	ref := make([]byte, g.ArraySectors()<<9)
	var id uint64
	for range 6 {
		pBatch(t, rng, h, r, ref, span, &id)
	}
	a.WaitSync()
	persistLogCheckpoint(t, a)

	const stripe, lo, hi = 1, 0, 8
	sm := g.Stripe(stripe)
	nd := uint64(g.DataMembers())
	var d1 int
	for m := range g.Members {
		if sm.Slot[m] == 1 {
			d1 = m
		}
	}
	idx1, idx0 := uint64(0), uint64(0)
	for i := range nd {
		if int(sm.Data[i]) == d1 {
			idx1 = i
		}
	}
	if idx1 == 0 {
		idx0 = 1
	}
	d0 := int(sm.Data[idx0])
	off := int64(a.dataOffset + (stripe*g.ChunkSectors+lo)<<9)
	n := int(hi-lo) << 9
	old := make([][]byte, nd)
	for m := range g.Members {
		if s := sm.Slot[m]; s >= 0 {
			if old[s], err = a.Members[m].ReadBlock(off, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	a1 := (stripe*nd+idx1)*g.ChunkSectors + lo
	a0 := (stripe*nd+idx0)*g.ChunkSectors + lo
	newB := pageBuf(n)
	rng.Read(newB)
	if bytes.Equal(newB, old[1]) {
		t.Fatal("same data")
	}

	// The write, planned with every member in sync.
	delete(r.done, 0)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: a1, Sectors: hi - lo, Buf: newB})
	step := func(skip func(o pRingOp) bool) bool {
		for i, o := range r.pending {
			if skip != nil && skip(o) {
				continue
			}
			r.deliver(h, i)
			return true
		}
		if r.woke.Swap(false) {
			h.OnWake()
			return true
		}
		return false
	}
	// Until its pre-reads are out (the bitmap's wait answered).
	for deadline := 0; len(r.pending) == 0; deadline++ {
		if !step(nil) {
			if deadline > 200000 {
				t.Fatal("the write issued nothing")
			}
		}
	}
	for _, o := range r.pending {
		if o.io.Kind != engine.IORead {
			t.Fatalf("expected pre-reads first, got %+v", o.io)
		}
	}
	// d1 fails in memory now (its superblock update not yet durable).
	if st, changed, _ := a.Engine.FailRedundant(d1); !changed || st.Members[d1].State != engine.MemberFaulty {
		t.Fatalf("d1 not failed: %v", st.Members[d1].State)
	}
	// Everything goes through but the data write to d1, which does not
	// land before the power cut.
	isD1Data := func(o pRingOp) bool {
		return o.io.Kind == engine.IOWrite && !o.io.Log && int(o.io.Member) == d1
	}
	sawD1, sawLog, sawP := false, false, false
	for range 1000 {
		for _, o := range r.pending {
			switch {
			case isD1Data(o):
				sawD1 = true
			case o.io.Kind == engine.IOWrite && o.io.Log:
				sawLog = true
			case o.io.Kind == engine.IOWrite && int(o.io.Member) == sm.P:
				sawP = true
			}
		}
		if !step(isD1Data) {
			break
		}
	}
	if !sawLog || !sawP {
		t.Fatalf("write phases: d1 data %v, log %v, P %v", sawD1, sawLog, sawP)
	}
	_, acked := r.done[0]
	// The power cut.
	snap := powerCutCopy(t, paths)
	// (The original array finishes: d1's write fails.)
	r.failOn = func(io engine.MemberIO) bool { return int(io.Member) == d1 }
	pServe(t, rng, h, r, []uint16{0})
	a.Close()

	if sb := superblockOf(t, snap[sm.P]); sb.Roles[d1].State == engine.RoleFaulty {
		// The write was held until d1's failure was durable, and left
		// d1 out (it wrote no data there): the cut finds d1 failed, as
		// it was when the log entry and P were written.
		if sawD1 {
			t.Fatal("the write went to d1 after its failure was recorded")
		}
		if missing {
			if b, err := Open(append(append([]string(nil), snap[:d0]...), snap[d0+1:]...), CreateSpec{Level: -1}, false); err == nil {
				b.Close()
				t.Fatal("raid5 with d1 failed and d0 missing assembled")
			}
			return
		}
		b, err := Open(snap, CreateSpec{Level: -1}, false)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if got := pReadOne(t, rng, b, a0, hi-lo); !bytes.Equal(got, old[sm.Slot[d0]]) {
			t.Fatal("the rows of d0 (a chunk nobody wrote) read back wrong")
		}
		if got := pReadOne(t, rng, b, a1, hi-lo); !bytes.Equal(got, newB) {
			t.Fatal("the write, its log entry and parity written with d1 failed, reads back wrong through the parity")
		}
		return
	}
	if acked {
		t.Fatalf("the write completed (acknowledged) before d1's failure was durable: %v", r.done[0])
	}
	if missing {
		// d0's disk did not come back with the power: a dirty degraded
		// array, which the log lets start without force.
		give := append(append([]string(nil), snap[:d0]...), snap[d0+1:]...)
		b, err := Open(give, CreateSpec{Level: -1}, false)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		t.Logf("warnings: %q", b.Warnings)
		if got := pReadOne(t, rng, b, a0, hi-lo); !bytes.Equal(got, old[sm.Slot[d0]]) {
			t.Fatal("started dirty degraded without force; the rows of the missing d0 (a chunk nobody wrote) read back wrong")
		}
		return
	}
	b, err := Open(snap, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	replayed := false
	for _, w := range b.Warnings {
		replayed = replayed || strings.Contains(w, "interrupted writes recomputed")
	}
	t.Logf("warnings: %q", b.Warnings)
	if st := b.Engine.State().Members[d1].State; st != engine.MemberActive {
		t.Fatalf("d1 is %v after assembly", st)
	}
	if got, _ := b.Members[d1].ReadBlock(off, n); !bytes.Equal(got, old[1]) {
		t.Fatal("d1 does not hold B's old rows (the setup is wrong)")
	}
	// Is the stripe consistent after the replay?
	x := make([]byte, n)
	var pOnDisk []byte
	for m := range g.Members {
		c, err := b.Members[m].ReadBlock(off, n)
		if err != nil {
			t.Fatal(err)
		}
		if m == sm.P {
			pOnDisk = c
			continue
		}
		for i := range x {
			x[i] ^= c[i]
		}
	}
	consistent := bytes.Equal(x, pOnDisk)
	b.StopSync()
	if err := b.Fail(d0); err != nil {
		t.Fatal(err)
	}
	got := pReadOne(t, rng, b, a0, hi-lo)
	if !bytes.Equal(got, old[sm.Slot[d0]]) {
		t.Fatalf("replayed %v, stripe consistent after assembly %v: the rows of d0 (a chunk nobody wrote), lost after the crash, read back wrong", replayed, consistent)
	}
}
