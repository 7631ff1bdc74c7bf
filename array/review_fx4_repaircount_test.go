package array

import (
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review (fx4). Since e32eb7f the raid5/6 read repair re-reads
// the member a 4 KiB block at a time and rewrites only the blocks that
// still fail (rewriteBadRows); a read error that does not come back (a
// transient error, a timeout) rewrites nothing. The repair still counts
// one read repair for it (repairParityRows: readRepairs.Add(1) whenever
// rewriteBadRows returns nil), and ublkraid_read_repairs_total is
// documented (README, metrics) as "ranges rewritten from another copy
// after a read error, and read back": the counter, which operators read
// as sectors a disk had to have rewritten (md's corrected errors), now
// counts repairs that never happened. Here the user read fails once on
// the ring; the member reads fine to the repair worker.
func TestReviewfx4ParityReadRepairCountedWithoutRewrite(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	paths := memberFiles(t, 3, 16<<20)
	setRW := hookRW(t)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ChunkSectors: 16, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g := *a.Engine.Parity
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)

	const stripeSectors = 32
	wbuf := pageBuf(stripeSectors << 9)
	fillSectors(wbuf, 7)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 0, Sectors: stripeSectors, Buf: wbuf})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}

	_, _, mem, msec := g.LocateData(0)
	dev := a.Members[mem].Device
	var writes atomic.Int64
	reread := make(chan struct{})
	var once sync.Once
	lo := int64(a.dataOffset) + int64(msec)<<9
	setRW(func(d Device, p []byte, off int64, write bool) error {
		if d == dev && write {
			writes.Add(1)
		}
		err := deviceRW(d, p, off, write)
		if d == dev && !write && p != nil && off == lo {
			once.Do(func() { close(reread) }) // the repair's read of the block
		}
		return err
	})
	// One failed read of the member's first 4 KiB, on the ring only.
	var failed atomic.Bool
	r.failOn = func(io engine.MemberIO) bool {
		return io.Kind == engine.IORead && int(io.Member) == mem && io.Sector < msec+8 && io.Sector+uint64(io.Sectors) > msec && failed.CompareAndSwap(false, true)
	}
	buf := pageBuf(8 << 9)
	h.Handle(&ublk.Request{Tag: 1, Op: ublk.IOOpRead, Sector: 0, Sectors: 8, Buf: buf})
	pServe(t, rng, h, r, []uint16{1})
	if err := r.done[1]; err != nil {
		t.Fatalf("read: %v", err)
	}
	if !failed.Load() {
		t.Fatal("the read error was not injected")
	}
	select {
	case <-reread:
	case <-time.After(10 * time.Second):
		t.Fatal("the repair did not read the block again")
	}
	a.Close() // waits for the repair worker, which ends the repair first
	if n, w := a.ReadRepairs(), writes.Load(); n != 0 || w != 0 {
		t.Fatalf("ReadRepairs() = %d (ublkraid_read_repairs_total: \"ranges rewritten from another copy after a read error, and read back\"), with %d writes to member %d: its block read fine again and rewriteBadRows kept it", n, w, mem)
	}
}
