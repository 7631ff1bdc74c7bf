package array

import (
	"bytes"
	"math/rand"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review (rd); the repair part is fixed (rewriteBadRows), the
// read's answer is documented. A raid5 user read of a member's chunk piece that
// fails because of one bad 4 KiB block is answered, for the whole piece,
// from the reconstruction (the other data and P), and the read-repair
// worker then rewrites the whole piece on the member from it: the blocks
// of the piece that read fine are replaced too. Where the stripe's parity
// does not match its data in those rows (a mismatch `check` would count:
// bit rot, a forced assembly), the read answers, and the repair writes to
// the member, data other than what the member holds and reads back fine.
// md's raid5 retries a failed chunk-aligned read through its 4 KiB stripe
// heads (retry_aligned_read): only the page that fails is computed from
// the parity, the others are the member's; the project's own check and
// repair do the same (parityRewriteBad: "a row that reads is kept as it
// is, so a wrong parity elsewhere in the piece is still counted, not
// copied into the data"), and its raid1/10 reads narrow a failed read to
// its blocks (Executor.RetryUnit).
func TestReviewrdParityReadErrorReplacesReadableRows(t *testing.T) {
	set := hookRW(t)
	rng := rand.New(rand.NewSource(1))
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ChunkSectors: 16, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g := *a.Engine.Parity
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)

	// A full-stripe write of known data to stripe 0 (array sectors 0..31).
	const stripeSectors = 32
	ref := pageBuf(stripeSectors << 9)
	fillSectors(ref, 7)
	wbuf := pageBuf(stripeSectors << 9)
	copy(wbuf, ref)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 0, Sectors: stripeSectors, Buf: wbuf})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}

	// Array sectors 0..15 are the first data chunk of stripe 0. Its
	// second 4 KiB (rows 8..15) reads fine, but P disagrees with the data
	// there (a mismatch); its first 4 KiB (rows 0..7) is a bad block.
	_, _, mem, msec := g.LocateData(0)
	pm := g.Stripe(0).P
	scribble(t, a, paths[pm], int64(msec+8)<<9, 8<<9, 0x5a)
	// The bad block fails the repair's reads too, until a write cures it.
	a.mu.Lock()
	bad := a.Members[mem].Device
	a.mu.Unlock()
	var cured atomic.Bool
	lo := int64(a.dataOffset) + int64(msec)<<9
	set(func(d Device, p []byte, off int64, write bool) error {
		if d == bad && p != nil && off < lo+8<<9 && off+int64(len(p)) > lo {
			if write {
				cured.Store(true)
			} else if !cured.Load() {
				return unix.EIO
			}
		}
		return deviceRW(d, p, off, write)
	})
	r.failOn = func(io engine.MemberIO) bool {
		return io.Kind == engine.IORead && int(io.Member) == mem && io.Sector < msec+8 && io.Sector+uint64(io.Sectors) > msec
	}
	buf := pageBuf(16 << 9)
	delete(r.done, 1)
	h.Handle(&ublk.Request{Tag: 1, Op: ublk.IOOpRead, Sector: 0, Sectors: 16, Buf: buf})
	pServe(t, rng, h, r, []uint16{1})
	if err := r.done[1]; err != nil {
		t.Fatalf("read over one bad block: %v", err)
	}
	answered := bytes.Equal(buf[8<<9:16<<9], ref[8<<9:16<<9])
	// The read repair of the bad block (rows 0..7).
	waitFor(t, "the read repair ran", func() bool { return a.ReadRepairs() > 0 })
	a.StopSync()
	kept := bytes.Equal(dataOf(t, a, paths[mem])[(msec+8)<<9:(msec+16)<<9], ref[8<<9:16<<9])
	// (The read's answer for rows 8..15 is still the reconstruction,
	// which differs from the member there only where the parity
	// disagrees: README, read errors on raid5/6.)
	t.Logf("rows 8..15 answered as written: %v", answered)
	if !kept {
		t.Fatalf("array sectors 8..15, which member %d reads fine: not on the member as written after the read repair (a read error in sectors 0..7 of the same member read made the repair rewrite the whole piece from the parity)", mem)
	}
}
