package engine

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestParityLogHeader(t *testing.T) {
	b := make([]byte, 8192)
	h := ParityLogHeader{Array: plogUUID, Checkpoint: 1 << 40}
	if err := h.Encode(b); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeParityLogHeader(b, plogUUID)
	if err != nil || got != h {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, h)
	}
	if _, err := DecodeParityLogHeader(b, [16]byte{1}); !errors.Is(err, ErrParityLogCorrupt) {
		t.Fatalf("another array's header: %v", err)
	}
	for i := range ParityLogHeaderSize {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		if _, err := DecodeParityLogHeader(c, plogUUID); !errors.Is(err, ErrParityLogCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, err := DecodeParityLogHeader(make([]byte, 4096), plogUUID); !errors.Is(err, ErrNoParityLogEntry) {
		t.Fatalf("zeroed header: %v", err)
	}
	if _, err := DecodeParityLogHeader(b[:4095], plogUUID); !errors.Is(err, ErrParityLogCorrupt) {
		t.Fatalf("short header: %v", err)
	}
	if (&ParityLogHeader{Array: plogUUID}).Encode(b) == nil || (&ParityLogHeader{Checkpoint: 1}).Encode(b) == nil {
		t.Fatal("a header with checkpoint 0 or no UUID encoded")
	}
	// A checkpoint past every entry number read (a crafted or damaged
	// header): refused, or the numbers after it would wrap.
	h = ParityLogHeader{Array: plogUUID, Checkpoint: MaxParityLogCheckpoint}
	if err := h.Encode(b); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeParityLogHeader(b, plogUUID); err != nil {
		t.Fatalf("checkpoint %d: %v", h.Checkpoint, err)
	}
	h.Checkpoint++
	if err := h.Encode(b); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeParityLogHeader(b, plogUUID); !errors.Is(err, ErrParityLogCorrupt) || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("checkpoint 2^63: %v", err)
	}
}

// ScanParityLog finds every entry written in an area, wherever it
// starts on a 4 KiB boundary, past entries torn, overwritten in part,
// of other arrays, and garbage; ParityLogReplay keeps those at or above
// the checkpoint, once each, oldest first.
func TestParityLogScanAndReplay(t *testing.T) {
	g, _, _ := plogFixture(t)
	r := rand.New(rand.NewPCG(7, 8))
	area := make([]byte, 1<<20)
	for i := range area {
		area[i] = byte(r.Uint32())
	}
	h := ParityLogHeader{Array: plogUUID, Checkpoint: 10}
	if err := h.Encode(area); err != nil {
		t.Fatal(err)
	}
	put := func(off int, seq, stripe, lo, hi uint64, uuid [16]byte) ParityLogEntry {
		n := int(hi-lo) * 512
		e := ParityLogEntry{Array: uuid, Seq: seq, Stripe: stripe, RowLo: lo, RowHi: hi, Logged: 0b0101, Written: 0b0010, Parity: 2,
			P: randChunks(r, 1, n)[0], Q: randChunks(r, 1, n)[0]}
		if _, err := e.Encode(area[off:], g); err != nil {
			t.Fatal(err)
		}
		return e
	}
	var want []uint64
	put(4096, 12, 1, 0, 16, plogUUID)     // 4K + 16 KiB: to 24K
	want = append(want, 12)               //
	put(24576, 9, 2, 8, 24, plogUUID)     // below the checkpoint
	put(65536, 30, 3, 0, 64, plogUUID)    // a whole chunk: 4K + 64 KiB
	want = append(want, 30)               //
	put(4096*40, 11, 0, 8, 16, plogUUID)  // a copy of the same entry next (raid6's other member): once
	put(4096*43, 11, 0, 8, 16, plogUUID)  //
	want = append([]uint64{11}, want...)  //
	put(4096*50, 20, 2, 3, 10, plogUUID)  // rows of single sectors: 4K + 7 KiB, 3 blocks
	put(4096*53, 21, 2, 10, 11, plogUUID) // right after them
	want = append(want, 20, 21)
	put(4096*60, 40, 1, 0, 8, [16]byte{9}) // another array's
	torn := put(4096*70, 41, 2, 0, 8, plogUUID)
	area[4096*70+4096+100] ^= 1 // its payload torn
	_ = torn
	// An entry whose first blocks were overwritten by a later one's
	// payload is not found; the later one is.
	put(4096*90, 50, 3, 0, 32, plogUUID)
	put(4096*88, 51, 3, 0, 16, plogUUID) // 4K + 16K: covers 88..92, over 50's header
	want = append(want, 51)
	found := ScanParityLog(area, g, plogUUID)
	checkScanFrom(t, area, g, found)
	seqs := map[uint64]int{}
	for _, e := range found {
		seqs[e.Seq]++
	}
	if seqs[20] != 1 || seqs[21] != 1 || seqs[12] != 1 || seqs[9] != 1 || seqs[30] != 1 || seqs[11] != 2 || seqs[51] != 1 || seqs[40] != 0 || seqs[41] != 0 || seqs[50] != 0 {
		t.Fatalf("scan found %v", seqs)
	}
	slices.Sort(want)
	got := ParityLogReplay(found, h.Checkpoint)
	if len(got) != len(want) {
		t.Fatalf("replay %d entries, want %v", len(got), want)
	}
	for i, e := range got {
		if e.Seq != want[i] {
			t.Fatalf("replay order %d: seq %d, want %v", i, e.Seq, want)
		}
	}
}

// checkScanFrom: ScanParityLogFrom finds what ScanParityLog found in
// area, with windows from the smallest allowed to the whole area, and
// keeps only what keep accepts, its payloads not aliasing the window.
func checkScanFrom(t *testing.T, area []byte, g ParityGeometry, want []ParityLogEntry) {
	t.Helper()
	maxEntry := MaxParityLogEntrySize(g, len(area))
	reads := 0
	read := func(off int64, b []byte) error {
		reads++
		if off%4096 != 0 || len(b)%4096 != 0 || int(off)+len(b) > len(area) {
			t.Fatalf("read of %d bytes at %d", len(b), off)
		}
		copy(b, area[off:])
		return nil
	}
	for _, w := range []int{int(roundUp(uint64(maxEntry), 4096)), 4096 * 25, 256 << 10, len(area)} {
		buf := make([]byte, w)
		reads = 0
		got, err := ScanParityLogFrom(read, len(area), buf, g, plogUUID, func(*ParityLogEntry) bool { return true })
		if err != nil {
			t.Fatalf("window %d: %v", w, err)
		}
		if len(got) != len(want) {
			t.Fatalf("window %d: %d entries, ScanParityLog found %d", w, len(got), len(want))
		}
		for i := range got {
			a, b := got[i], want[i]
			if a.Seq != b.Seq || a.Stripe != b.Stripe || a.RowLo != b.RowLo || a.RowHi != b.RowHi || a.Logged != b.Logged ||
				!slices.Equal(a.P, b.P) || !slices.Equal(a.Q, b.Q) {
				t.Fatalf("window %d: entry %d is %+v, want %+v", w, i, a, b)
			}
		}
		if w < len(area) && reads < 2 {
			t.Fatalf("window %d: the area was read in %d windows", w, reads)
		}
		clear(buf)
		for i := range got {
			if slices.ContainsFunc(got[i].P, func(c byte) bool { return c != 0 }) != slices.ContainsFunc(want[i].P, func(c byte) bool { return c != 0 }) {
				t.Fatalf("window %d: entry %d's payload aliases the window", w, i)
			}
		}
	}
	kept, err := ScanParityLogFrom(read, len(area), make([]byte, 256<<10), g, plogUUID, func(e *ParityLogEntry) bool { return e.Seq%2 == 0 })
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range want {
		if e.Seq%2 == 0 {
			n++
		}
	}
	if len(kept) != n || slices.ContainsFunc(kept, func(e ParityLogEntry) bool { return e.Seq%2 != 0 }) {
		t.Fatalf("kept %d entries, want the %d with even numbers", len(kept), n)
	}
	if _, err := ScanParityLogFrom(read, len(area), make([]byte, maxEntry-4096), g, plogUUID, func(*ParityLogEntry) bool { return true }); err == nil {
		t.Fatal("a window smaller than the largest entry was taken")
	}
	boom := errors.New("boom")
	if _, err := ScanParityLogFrom(func(int64, []byte) error { return boom }, len(area), make([]byte, 256<<10), g, plogUUID, func(*ParityLogEntry) bool { return true }); !errors.Is(err, boom) {
		t.Fatalf("a read error: %v", err)
	}
}

// ParityLogScanWindow's window reads an area about twice at most, for
// chunks from small to the largest (a review found a window of the
// largest entry read 112 GiB per 64 MiB area with 8 MiB chunks).
func TestParityLogScanWindowReadsAreaTwiceAtMost(t *testing.T) {
	for _, g := range []ParityGeometry{
		{Level: Level5, Members: 4, Layout: LeftSymmetric, ChunkSectors: 16384, MemberSectors: 16384 * 4},
		{Level: Level6, Members: 6, Layout: LeftSymmetric, ChunkSectors: 8192, MemberSectors: 8192 * 4},
		{Level: Level6, Members: 6, Layout: LeftSymmetric, ChunkSectors: 7168, MemberSectors: 7168 * 4},
		{Level: Level5, Members: 5, Layout: LeftSymmetric, ChunkSectors: 128, MemberSectors: 128 * 64},
		{Level: Level6, Members: 5, Layout: LeftSymmetric, ChunkSectors: 131072, MemberSectors: 131072 * 2},
	} {
		for _, least := range []int{0, 8 << 20} {
			area := MaxLogBytes
			total := 0
			read := func(off int64, b []byte) error { total += len(b); return nil }
			buf := make([]byte, ParityLogScanWindow(g, area, least))
			if _, err := ScanParityLogFrom(read, area, buf, g, plogUUID, func(*ParityLogEntry) bool { return true }); err != nil {
				t.Fatal(err)
			}
			if total > 2*area+len(buf) {
				t.Errorf("%s, %d-sector chunks, window %d: read %d bytes of a %d-byte area", g.Level, g.ChunkSectors, len(buf), total, area)
			}
		}
	}
}
