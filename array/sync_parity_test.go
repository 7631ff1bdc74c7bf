package array

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Parity check and resync of bitmap regions: check counts the stripes
// whose parity is not that of their data and writes nothing; resync
// rewrites them and makes the regions trusted (RMW from then on), all
// while a queue serves writes to the same stripes under the stripe lock;
// the data then survives a member's loss. A single corrupted P is found
// and repaired; a degraded array is refused.
func TestParitySyncRegions(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	paths := memberFiles(t, 5, 16<<20)
	for _, p := range paths {
		b := make([]byte, 16<<20)
		rng.Read(b[8192:]) // garbage: the never-written parity is wrong
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ParityLayout: engine.LeftSymmetric, ChunkSectors: 16, RegionSectors: 128, serveParity: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g := *a.Engine.Parity
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	const span, checked = 2048, 4096
	ref := make([]byte, g.ArraySectors()<<9)
	var id uint64
	// Written once in full: every read has one right answer.
	for s := uint64(0); s < span; s += 64 {
		id++
		buf := pageBuf(64 << 9)
		fillSectors(buf, id)
		delete(r.done, 0)
		h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: s, Sectors: 64, Buf: buf})
		pServe(t, rng, h, r, []uint16{0})
		if err := r.done[0]; err != nil {
			t.Fatal(err)
		}
		copy(ref[s<<9:], buf)
	}
	// A write holding stripe 0 (its member operations not delivered)
	// keeps a resync of region 0 out until it completes.
	held := pageBuf(8 << 9)
	id++
	fillSectors(held, id)
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
	resynced := make(chan error, 1)
	go func() {
		_, err := a.syncParityRegions(0, 0, true)
		resynced <- err
	}()
	select {
	case err := <-resynced:
		t.Fatalf("resync of a stripe a write holds went ahead (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}
	copy(ref[8<<9:], held)
	select {
	case err := <-resynced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("resync never got the stripe the write released")
	}
	first, last := a.Bitmap.Regions(0, checked)
	before := fileBytes(t, paths...)
	res, err := a.syncParityRegions(first, last, false)
	if err != nil {
		t.Fatal(err)
	}
	per := g.ChunkSectors * uint64(g.DataMembers())
	if res.Stripes != (checked+per-1)/per || res.Mismatches == 0 {
		t.Fatalf("check: %+v (garbage beyond %d sectors must mismatch)", res, span)
	}
	for i, b := range fileBytes(t, paths...) {
		if !bytes.Equal(b, before[i]) {
			t.Fatalf("check wrote member %d", i)
		}
	}
	if !a.Bitmap.NeedsSync(first + 1) {
		t.Fatal("check marked a region resynced")
	}
	// Resync while the queue writes and reads the same stripes.
	done := make(chan error, 1)
	var fixed ParitySyncResult
	go func() {
		var err error
		fixed, err = a.syncParityRegions(first, last, true)
		done <- err
	}()
	for running := true; running; {
		pBatch(t, rng, h, r, ref, span, &id)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
	}
	if fixed.Mismatches == 0 || fixed.Mismatches > res.Mismatches {
		t.Fatalf("resync fixed %d stripes, check found %d", fixed.Mismatches, res.Mismatches)
	}
	if res, err = a.syncParityRegions(first, last, false); err != nil || res.Mismatches != 0 {
		t.Fatalf("check after resync: %+v, %v", res, err)
	}
	pConsistent(t, a, checked-checked%per)
	for reg := first; reg <= last; reg++ {
		if a.Bitmap.NeedsSync(reg) {
			t.Fatalf("region %d still needs sync", reg)
		}
	}
	if a.parityUntrusted(0) {
		t.Fatal("stripe 0 untrusted after its region's resync")
	}
	// Trusted now: RMW. Writes, then a member lost: all reads right.
	for range 20 {
		pBatch(t, rng, h, r, ref, span, &id)
	}
	if res, err = a.syncParityRegions(first, last, false); err != nil || res.Mismatches != 0 {
		t.Fatalf("check after RMW writes: %+v, %v", res, err)
	}
	// One P corrupted on the member: found, repaired.
	m := g.Stripe(5)
	junk := pageBuf(512)
	rng.Read(junk)
	if err := a.Members[m.P].WriteAt(junk, int64(a.dataOffset+(5*g.ChunkSectors+3)<<9)); err != nil {
		t.Fatal(err)
	}
	if res, err = a.syncParityRegions(first, last, false); err != nil || res.Mismatches != 1 {
		t.Fatalf("check of one corrupted P: %+v, %v", res, err)
	}
	if res, err = a.syncParityRegions(first, last, true); err != nil || res.Mismatches != 1 {
		t.Fatalf("repair of one corrupted P: %+v, %v", res, err)
	}
	pConsistent(t, a, checked-checked%per)
	r.failOn = func(io engine.MemberIO) bool { return io.Member == 3 && io.Kind == engine.IOWrite }
	for range 20 {
		pBatch(t, rng, h, r, ref, span, &id)
	}
	r.failOn = nil
	if _, err := a.syncParityRegions(first, last, false); !errors.Is(err, errParityDegraded) {
		t.Fatalf("check of a degraded array: %v", err)
	}
	pReadAll(t, rng, h, r, ref, span)
}
