package array

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review: raid5 with the write-hole log. A partial-stripe write
// to the chunk of member b ends (acknowledged: data and P durable, FUA);
// b is then failed (recorded in the superblocks); the power is cut before
// the checkpointer's next tick. Nothing was in flight at the cut: every
// stripe's parity matches its data, and the log has nothing to replay
// (md with PPL starts such an array). The write's entry was still live,
// needed b's chunk, and the assembly was refused as a dirty degraded
// array. The checkpoint is now persisted before the failure is recorded.
func TestLogEntryOfMemberFailedAfterItsWriteEnded(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	paths, a, g, r, h, ref, span := loggedParity(t, rng, engine.Level5, 4)

	const stripe, lo, hi = 1, 0, 8
	sm := g.Stripe(stripe)
	nd := uint64(g.DataMembers())
	bIdx := uint64(1)
	bMem := int(sm.Data[bIdx])
	aB := (stripe*nd+bIdx)*g.ChunkSectors + lo
	newB := pageBuf(int(hi-lo) << 9)
	rng.Read(newB)
	delete(r.done, 0)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: aB, Sectors: hi - lo, Buf: newB})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}
	copy(ref[aB<<9:], newB)
	if err := pDo(h, r, func() error { return a.Fail(bMem) }); err != nil {
		t.Fatal(err)
	}
	snap := powerCutCopy(t, paths)
	a.Close()

	b, err := Open(snap, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("dirty degraded raid5, nothing in flight at the power cut, member failed after its last write ended: %v", err)
	}
	defer b.Close()
	b.StopSync()
	got := pReadOne(t, rng, b, 0, span)
	if !bytes.Equal(got, ref[:span<<9]) {
		t.Fatal("data reads back wrong")
	}
}

// loggedParity is a dirty raid5/6 of members files with the write-hole
// log, its checkpointer's tick not drawn (the test says when a checkpoint
// is written: in a real run an entry stays live until the next tick, or
// while an older write of any queue is still out), after six random
// batches of writes through queue h on ring r over the array's first span
// sectors (ref: what the array holds), and a checkpoint past them.
func loggedParity(t *testing.T, rng *rand.Rand, level engine.Level, members int) (paths []string, a *Array, g engine.ParityGeometry, r *pRing, h *queue, ref []byte, span uint64) {
	t.Helper()
	paths = memberFiles(t, members, 16<<20)
	a, err := Open(paths, CreateSpec{Level: level, ChunkSectors: 16, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	a.logCheckpointEvery = time.Hour
	g = *a.Engine.Parity
	r = &pRing{done: map[uint16]error{}}
	h = a.newQueue(r)
	span = g.ChunkSectors * uint64(g.DataMembers()) * 4
	ref = make([]byte, g.ArraySectors()<<9)
	var id uint64
	for range 6 {
		pBatch(t, rng, h, r, ref, span, &id)
	}
	a.WaitSync()
	persistLogCheckpoint(t, a)
	return paths, a, g, r, h, ref, span
}
