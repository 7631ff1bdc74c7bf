package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

var plogUUID = [16]byte{0: 0xa5, 7: 1, 15: 0x5a}

// drawParityGeometry draws a small raid5 or raid6 geometry: 3 to 8
// members, a chunk of 4 to 32 KiB, 1 to 4 stripes.
func drawParityGeometry(t *rapid.T) ParityGeometry {
	level := rapid.SampledFrom([]Level{Level5, Level6}).Draw(t, "level")
	min := 3
	if level == Level6 {
		min = 4
	}
	g := ParityGeometry{
		Level:        level,
		Members:      rapid.IntRange(min, 8).Draw(t, "members"),
		Layout:       ParityLayout(rapid.IntRange(0, 3).Draw(t, "layout")),
		ChunkSectors: uint64(8) << rapid.IntRange(0, 2).Draw(t, "chunk shift"),
	}
	g.MemberSectors = g.ChunkSectors * uint64(rapid.IntRange(1, 4).Draw(t, "stripes"))
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	return g
}

func drawBytes(t *rapid.T, n int, label string) []byte {
	seed := rapid.Uint64().Draw(t, label)
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sectorMix fills dst sector by sector from one of the sources, drawn.
func sectorMix(t *rapid.T, dst []byte, label string, srcs ...[]byte) {
	for o := 0; o < len(dst); o += sbSector {
		k := rapid.IntRange(0, len(srcs)-1).Draw(t, label)
		copy(dst[o:o+sbSector], srcs[k][o:o+sbSector])
	}
}

// sameEntry compares entries field by field, the payload by content.
func sameEntry(a, b ParityLogEntry) bool {
	return a.Array == b.Array && a.Seq == b.Seq && a.Stripe == b.Stripe && a.RowLo == b.RowLo && a.RowHi == b.RowHi &&
		a.Logged == b.Logged && a.Written == b.Written && a.Parity == b.Parity && bytes.Equal(a.P, b.P) && bytes.Equal(a.Q, b.Q)
}

func cloneChunks(c [][]byte) [][]byte {
	out := make([][]byte, len(c))
	for i, b := range c {
		if b != nil {
			out[i] = bytes.Clone(b)
		}
	}
	return out
}

// TestParityLogClosesWriteHole: a write to a stripe, healthy or degraded
// (members lost before it), crashes with every surviving written data
// sector and parity sector old, new or torn, and maybe members lost in
// the crash; replaying the log entry (through its encoding), X being the
// slots not written and the written slots of members lost before, with
// the members left, and then losing more members (all within the
// parity's budget), every chunk
// rebuilds to its intended value: old where the write did not write it,
// new where it wrote a lost member's, and as on disk where it wrote a
// member that survived the crash. And without the log the same crashes
// do rebuild chunks wrong (the scenario really tears).
func TestParityLogClosesWriteHole(t *testing.T) {
	runs, tears := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		runs++
		if parityLogCrash(t) {
			tears++
		}
	})
	if runs >= 20 && tears == 0 {
		t.Errorf("in %d drawn crashes, the lost chunks never rebuilt wrong without the log: the test does not tear", runs)
	}
}

// parityLogCrash runs one drawn crash and reports whether, without the
// log, a chunk would have been rebuilt wrong.
func parityLogCrash(t *rapid.T) (tore bool) {
	g := drawParityGeometry(t)
	nd, pc := g.DataMembers(), g.ParityMembers()
	p, err := NewParity(nd, pc == 2)
	if err != nil {
		t.Fatal(err)
	}
	stripe := rapid.Uint64Range(0, g.Stripes()-1).Draw(t, "stripe")
	m := g.Stripe(stripe)
	lo := rapid.Uint64Range(0, g.ChunkSectors-1).Draw(t, "lo")
	hi := rapid.Uint64Range(lo+1, g.ChunkSectors).Draw(t, "hi")
	rows := hi - lo
	n := int(rows) * sbSector

	// Members lost before the write, in the crash (absent at the
	// recovery) and after the recovery, in one drawn order over every
	// member: budget pc in all. A data member lost in the crash holds a
	// chunk the write does not write (one it writes is being written:
	// whatever it held is as right).
	all := make([]int, g.Members)
	for i := range all {
		all[i] = i
	}
	perm := rapid.Permutation(all).Draw(t, "loss order")
	nBefore := rapid.IntRange(0, pc).Draw(t, "lost before")
	nCrash := rapid.IntRange(0, pc-nBefore).Draw(t, "lost in the crash")
	nAfter := rapid.IntRange(0, pc-nBefore-nCrash).Draw(t, "lost after")
	var before, crash, after uint64
	for _, mem := range perm[:nBefore] {
		before |= 1 << uint(mem)
	}
	for _, mem := range perm[nBefore : nBefore+nCrash] {
		crash |= 1 << uint(mem)
	}
	for _, mem := range perm[nBefore+nCrash : nBefore+nCrash+nAfter] {
		after |= 1 << uint(mem)
	}
	lostBefore, lostCrash, lostAfter := m.SlotMask(before), m.SlotMask(crash), m.SlotMask(after)
	full := uint64(1)<<uint(nd) - 1
	if full&^lostCrash == 0 {
		// Every data member lost in the crash (raid6 of 4): the write
		// wrote none of them, so it wrote nothing. One is lost after
		// the recovery instead (the budget is the same).
		for _, mem := range perm[nBefore : nBefore+nCrash] {
			if m.Slot[mem] >= 0 {
				crash &^= 1 << uint(mem)
				after |= 1 << uint(mem)
				break
			}
		}
		lostCrash, lostAfter = m.SlotMask(crash), m.SlotMask(after)
	}
	written := rapid.Uint64Range(1, full).Draw(t, "written") &^ lostCrash
	if written == 0 {
		written = full &^ lostCrash &^ (full&^lostCrash - 1) // the lowest slot left
	}
	x := full&^written | written&lostBefore

	// The stripe's rows before the write (consistent), and the values the
	// write means to leave.
	old := make([][]byte, nd)
	intended := make([][]byte, nd)
	for s := range nd {
		old[s] = drawBytes(t, n, "old data")
		intended[s] = old[s]
		if written&(1<<uint(s)) != 0 {
			intended[s] = drawBytes(t, n, "new data")
		}
	}
	oldPar, newPar := [][]byte{make([]byte, n), make([]byte, n)}[:pc], [][]byte{make([]byte, n), make([]byte, n)}[:pc]
	if err := p.Compute(old, oldPar); err != nil {
		t.Fatal(err)
	}
	if err := p.Compute(intended, newPar); err != nil {
		t.Fatal(err)
	}

	// Before the write: the log entry, computed in its block.
	prows := rows // (an entry of no slot has no payload)
	if x == 0 {
		prows = 0
	}
	buf := make([]byte, ParityLogEntrySize(prows, pc)+rapid.IntRange(0, 2).Draw(t, "slack")*sbSector)
	lp, lq := ParityLogPayload(buf, prows, pc)
	arg := make([][]byte, nd) // X's entries only, or every one
	every := rapid.Bool().Draw(t, "pass every chunk")
	for s := range nd {
		if every || x&(1<<uint(s)) != 0 {
			arg[s] = intended[s]
		}
	}
	if err := p.LogParity(arg, x, [][]byte{lp, lq}[:pc]); err != nil {
		t.Fatal(err)
	}
	ent := ParityLogEntry{Array: plogUUID, Seq: rapid.Uint64Range(1, MaxParityLogSeq).Draw(t, "seq"),
		Stripe: stripe, RowLo: lo, RowHi: hi, Logged: x, Written: written, Parity: pc, P: lp, Q: lq}
	size, err := ent.Encode(buf, g)
	if err != nil {
		t.Fatal(err)
	}
	if size != ParityLogEntrySize(prows, pc) {
		t.Fatalf("Encode returned %d bytes, want %d", size, ParityLogEntrySize(prows, pc))
	}

	// The crash: each surviving written data sector old, new or torn,
	// each surviving parity sector old, new or torn.
	disk := make([][]byte, nd)
	for s := range nd {
		if (lostBefore|lostCrash)&(1<<uint(s)) != 0 {
			continue
		}
		disk[s] = bytes.Clone(old[s])
		if written&(1<<uint(s)) != 0 {
			sectorMix(t, disk[s], "data sector", old[s], intended[s], drawBytes(t, n, "torn data"))
		}
	}
	parMember := [2]int{m.P, m.Q}
	diskPar := make([][]byte, pc)
	for k := range pc {
		if (before|crash)&(1<<uint(parMember[k])) != 0 {
			continue
		}
		diskPar[k] = make([]byte, n)
		sectorMix(t, diskPar[k], "parity sector", oldPar[k], newPar[k], drawBytes(t, n, "torn parity"))
	}
	// What a chunk must rebuild to: as on disk if its member survived
	// the crash (written or not), else its intended value.
	want := make([][]byte, nd)
	for s := range nd {
		want[s] = disk[s]
		if want[s] == nil {
			want[s] = intended[s]
		}
	}
	// Every chunk lost, before or after, rebuilt from the parity on
	// disk and the chunks left.
	rebuild := func(par [][]byte) [][]byte {
		shards := append(cloneChunks(disk), cloneChunks(par)...)
		for s := range nd {
			if lostAfter&(1<<uint(s)) != 0 {
				shards[s] = nil
			}
		}
		for k := range pc {
			if after&(1<<uint(parMember[k])) != 0 {
				shards[nd+k] = nil
			}
		}
		if lostBefore|lostCrash|lostAfter == 0 {
			return shards
		}
		if err := p.ReconstructData(shards); err != nil {
			t.Fatal(err)
		}
		return shards
	}

	// Without the log: rebuild from the parity the crash left.
	naive := rebuild(diskPar)
	for s := range nd {
		if !bytes.Equal(naive[s], want[s]) {
			tore = true
		}
	}

	// Recovery: decode the entry, recompute the parity from it and the
	// data on disk outside X (whose members all survived the crash),
	// written to the parity members that survived it.
	got, err := DecodeParityLogEntry(buf, g, plogUUID)
	if err != nil {
		t.Fatal(err)
	}
	if !sameEntry(got, ent) {
		t.Fatalf("decoded %+v, want %+v", got, ent)
	}
	rec := [][]byte{make([]byte, n), make([]byte, n)}[:pc]
	if err := p.RecoverParity([][]byte{got.P, got.Q}[:pc], disk, x, rec); err != nil {
		t.Fatal(err)
	}
	// The recovered parity is the syndrome of what the chunks must
	// rebuild to.
	wantPar := [][]byte{make([]byte, n), make([]byte, n)}[:pc]
	if err := p.Compute(want, wantPar); err != nil {
		t.Fatal(err)
	}
	for k := range pc {
		if !bytes.Equal(rec[k], wantPar[k]) {
			t.Fatalf("recovered parity %d is not the syndrome of the chunks as they must rebuild", k)
		}
		if diskPar[k] == nil {
			rec[k] = nil // (its member is lost: nothing written there)
		}
	}
	fixed := rebuild(rec)
	for s := range nd {
		if !bytes.Equal(fixed[s], want[s]) {
			what := "kept"
			switch {
			case written&(1<<uint(s)) == 0:
				what = "not written: its old data"
			case lostBefore&(1<<uint(s)) != 0:
				what = "written, lost before: its new data"
			default:
				what = "written: as the crash left it"
			}
			t.Fatalf("slot %d (%s) rebuilt wrong after the log's recovery (lost before %#x, in the crash %#x, after %#x)", s, what, lostBefore, lostCrash, lostAfter)
		}
	}
	return tore
}

// TestParityLogWriteHoleByHand: raid5 of three members, the first data
// chunk's member lost; a write of the second chunk reaches its member
// but not P. Rebuilt from that P, the lost chunk is wrong; replaying the
// log entry makes it right.
func TestParityLogWriteHoleByHand(t *testing.T) {
	p, err := NewParity(2, false)
	if err != nil {
		t.Fatal(err)
	}
	d0, d1, d1new := bytes.Repeat([]byte{0x11}, 4096), bytes.Repeat([]byte{0x22}, 4096), bytes.Repeat([]byte{0x33}, 4096)
	pOld := make([]byte, 4096)
	if err := p.Compute([][]byte{d0, d1}, [][]byte{pOld}); err != nil {
		t.Fatal(err)
	}
	lp := make([]byte, 4096)
	if err := p.LogParity([][]byte{d0, nil}, 1, [][]byte{lp}); err != nil {
		t.Fatal(err)
	}
	// The crash: d1 new on disk, P old.
	naive := [][]byte{nil, bytes.Clone(d1new), bytes.Clone(pOld)}
	if err := p.ReconstructData(naive); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(naive[0], d0) {
		t.Fatal("without the log the lost chunk rebuilt right: no write hole to close")
	}
	pRec := make([]byte, 4096)
	if err := p.RecoverParity([][]byte{lp}, [][]byte{nil, d1new}, 1, [][]byte{pRec}); err != nil {
		t.Fatal(err)
	}
	fixed := [][]byte{nil, bytes.Clone(d1new), pRec}
	if err := p.ReconstructData(fixed); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fixed[0], d0) {
		t.Fatal("after replaying the log the lost chunk is not its old data")
	}
}

// plogFixture is a valid raid6 entry (6 members, 4 data slots, 64-sector
// chunks, 4 stripes) in a block with room for a whole chunk's payload.
func plogFixture(t *testing.T) (ParityGeometry, ParityLogEntry, []byte) {
	t.Helper()
	g := ParityGeometry{Level: Level6, Members: 6, Layout: LeftSymmetric, ChunkSectors: 64, MemberSectors: 256}
	r := rand.New(rand.NewPCG(5, 6))
	n := 16 * sbSector
	e := ParityLogEntry{Array: plogUUID, Seq: 7, Stripe: 3, RowLo: 8, RowHi: 24, Logged: 0b0001, Written: 0b0110, Parity: 2,
		P: randChunks(r, 1, n)[0], Q: randChunks(r, 1, n)[0]}
	b := make([]byte, ParityLogEntrySize(64, 2))
	for i := range b {
		b[i] = 0xee // trailing bytes past the entry are not its business
	}
	if _, err := e.Encode(b, g); err != nil {
		t.Fatal(err)
	}
	return g, e, b
}

// reseal recomputes both checksums of a patched block (the payload's over
// the length its header says, clamped to the block).
func reseal(b []byte) {
	le := binary.LittleEndian
	rows := le.Uint64(b[plOffRowHi:]) - le.Uint64(b[plOffRowLo:])
	pc := uint64(le.Uint32(b[plOffParity:]))
	end := uint64(len(b))
	if rows < end && pc <= 2 && ParityLogHeaderSize+rows*sbSector*pc < end {
		end = ParityLogHeaderSize + rows*sbSector*pc
	}
	le.PutUint32(b[plOffPayloadSum:], crc32.Checksum(b[ParityLogHeaderSize:end], castagnoli))
	le.PutUint32(b[plOffChecksum:], parityLogHeaderSum(b))
}

func wantCorrupt(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if !errors.Is(err, ErrParityLogCorrupt) {
		t.Errorf("%s: got %v, want an error wrapping ErrParityLogCorrupt", what, err)
		return
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("%s: got %v, want the reason %q", what, err, reason)
	}
}

func TestParityLogRoundTrip(t *testing.T) {
	g, e, b := plogFixture(t)
	got, err := DecodeParityLogEntry(b, g, plogUUID)
	if err != nil {
		t.Fatal(err)
	}
	if !sameEntry(got, e) {
		t.Fatalf("decoded %+v, want %+v", got, e)
	}
	// Exactly the entry's bytes decode too.
	if _, err := DecodeParityLogEntry(b[:ParityLogEntrySize(16, 2)], g, plogUUID); err != nil {
		t.Fatal(err)
	}
	// raid5: no Q.
	g5 := ParityGeometry{Level: Level5, Members: 3, Layout: RightAsymmetric, ChunkSectors: 8, MemberSectors: 16}
	e5 := ParityLogEntry{Array: plogUUID, Seq: 1, Stripe: 1, RowLo: 0, RowHi: 8, Logged: 2, Written: 3, Parity: 1, P: make([]byte, 4096)}
	b5 := make([]byte, ParityLogEntrySize(8, 1))
	if n, err := e5.Encode(b5, g5); err != nil || n != 8192 {
		t.Fatalf("raid5 Encode: %d, %v", n, err)
	}
	if got, err := DecodeParityLogEntry(b5, g5, plogUUID); err != nil || got.Q != nil || got.Logged != 2 {
		t.Fatalf("raid5 decode: %+v, %v", got, err)
	}
}

func TestParityLogDecodeTruncated(t *testing.T) {
	g, _, b := plogFixture(t)
	size := ParityLogEntrySize(16, 2)
	for _, n := range []int{0, 1, 8, ParityLogHeaderSize - 1, ParityLogHeaderSize, ParityLogHeaderSize + 1, size - 1} {
		_, err := DecodeParityLogEntry(b[:n], g, plogUUID)
		wantCorrupt(t, "truncated", err, "")
	}
}

// Every bit flipped anywhere in the entry is caught.
func TestParityLogDecodeFlippedBits(t *testing.T) {
	g, _, b := plogFixture(t)
	size := ParityLogEntrySize(16, 2)
	for i := range size {
		c := bytes.Clone(b)
		c[i] ^= 1 << uint(i%8)
		if _, err := DecodeParityLogEntry(c, g, plogUUID); !errors.Is(err, ErrParityLogCorrupt) {
			t.Fatalf("byte %d flipped: got %v", i, err)
		}
	}
	// A torn payload sector: the payload checksum.
	c := bytes.Clone(b)
	clear(c[ParityLogHeaderSize+sbSector : ParityLogHeaderSize+2*sbSector])
	_, err := DecodeParityLogEntry(c, g, plogUUID)
	wantCorrupt(t, "torn payload", err, "payload checksum")
	if !errors.Is(err, ErrBadChecksum) {
		t.Errorf("torn payload: %v does not wrap ErrBadChecksum", err)
	}
}

// Unlogged (the parity parts an RMW with a parity member out did not
// compute) is the header's flags and comes back decoded; a raid5 entry
// has no Q to leave unlogged.
func TestParityLogUnlogged(t *testing.T) {
	g, e, _ := plogFixture(t)
	for _, u := range []uint8{1, 2} {
		e.Unlogged = u
		b := make([]byte, ParityLogEntrySize(64, 2))
		if _, err := e.Encode(b, g); err != nil {
			t.Fatal(err)
		}
		d, err := DecodeParityLogEntry(b, g, plogUUID)
		if err != nil || d.Unlogged != u {
			t.Fatalf("unlogged %b: decoded %b, %v", u, d.Unlogged, err)
		}
	}
	g5 := ParityGeometry{Level: Level5, Members: 5, Layout: LeftSymmetric, ChunkSectors: 64, MemberSectors: 256}
	e5 := ParityLogEntry{Array: plogUUID, Seq: 7, Stripe: 3, RowLo: 8, RowHi: 24, Logged: 0b0001, Written: 0b0110, Parity: 1,
		P: e.P, Unlogged: 2}
	if _, err := e5.Encode(make([]byte, ParityLogEntrySize(64, 1)), g5); err == nil {
		t.Fatal("a raid5 entry with Q unlogged encoded")
	}
}

// Every field out of bounds, with both checksums right, is refused.
func TestParityLogDecodeBounds(t *testing.T) {
	g, _, b := plogFixture(t)
	le := binary.LittleEndian
	u64 := func(off int, v uint64) func([]byte) { return func(c []byte) { le.PutUint64(c[off:], v) } }
	u32 := func(off int, v uint32) func([]byte) { return func(c []byte) { le.PutUint32(c[off:], v) } }
	for _, tc := range []struct {
		name   string
		patch  func([]byte)
		reason string
	}{
		{"stripe past the end", u64(plOffStripe, 4), "stripe 4"},
		{"stripe huge", u64(plOffStripe, math.MaxUint64), "stripe"},
		{"rows past the chunk", u64(plOffRowHi, 72), "rows"},
		{"rows huge", u64(plOffRowHi, math.MaxUint64&^7), "rows"},
		{"rows empty", u64(plOffRowLo, 24), "rows"},
		{"rows reversed", u64(plOffRowLo, 32), "rows"},
		{"logged past the data slots", u64(plOffLogged, 1<<4), "logged slots"},
		{"logged bit 63", u64(plOffLogged, 1<<63), "logged slots"},
		{"nothing written", u64(plOffWritten, 0), "written slots"},
		{"written past the data slots", u64(plOffWritten, 0b10010), "written slots"},
		{"parity count 1 for raid6", u32(plOffParity, 1), "parity count"},
		{"parity count 0", u32(plOffParity, 0), "parity count"},
		{"parity count 3", u32(plOffParity, 3), "parity count"},
		{"sequence 0", u64(plOffSeq, 0), "sequence"},
		{"sequence 2^64-1 (its checkpoint would wrap)", u64(plOffSeq, math.MaxUint64), "largest"},
		{"sequence past the largest read", u64(plOffSeq, MaxParityLogSeq+1), "past"},
		{"other array", func(c []byte) { c[plOffUUID+3] ^= 1 }, "UUID"},
		{"zero array", func(c []byte) { clear(c[plOffUUID : plOffUUID+16]) }, "UUID"},
		{"other member count", u32(plOffMembers, 7), "written for"},
		{"other layout", u32(plOffLayout, uint32(RightSymmetric)), "written for"},
		{"other chunk", u32(plOffChunk, 128), "written for"},
		{"flags past the unlogged bits", u32(plOffFlags, 4), "flags"},
		{"reserved", func(c []byte) { c[ParityLogHeaderSize-1] = 1 }, "reserved byte 4095"},
		{"reserved first", func(c []byte) { c[plOffReserved] = 1 }, "reserved byte 104"},
		{"version", u32(plOffVersion, 2), "unknown format version"},
		{"magic", func(c []byte) { c[0] = 'U' }, "no write-hole log entry"},
	} {
		c := bytes.Clone(b)
		tc.patch(c)
		reseal(c)
		e, err := DecodeParityLogEntry(c, g, plogUUID)
		wantCorrupt(t, tc.name, err, tc.reason)
		if err != nil && (e.P != nil || e.Seq != 0) {
			t.Errorf("%s: an entry returned with the error: %+v", tc.name, e)
		}
	}
	if _, err := DecodeParityLogEntry(b, g, [16]byte{1}); !errors.Is(err, ErrParityLogCorrupt) {
		t.Errorf("decoded with another array's UUID: %v", err)
	}
	if _, err := DecodeParityLogEntry(make([]byte, 8192), g, plogUUID); !errors.Is(err, ErrNoParityLogEntry) || !errors.Is(err, ErrParityLogCorrupt) {
		t.Errorf("zeroed block: %v", err)
	}
	// A raid5 array does not take the raid6 entry, even of the same shape
	// otherwise.
	g5 := g
	g5.Level = Level5
	_, err := DecodeParityLogEntry(b, g5, plogUUID)
	wantCorrupt(t, "raid6 entry on raid5", err, "parity count")
	// An invalid geometry is the caller's error, not a corrupt entry.
	bad := g
	bad.ChunkSectors = 12
	if _, err := DecodeParityLogEntry(b, bad, plogUUID); err == nil || errors.Is(err, ErrParityLogCorrupt) {
		t.Errorf("invalid geometry: %v", err)
	}
}

func TestParityLogEncodeRefuses(t *testing.T) {
	g, e, b := plogFixture(t)
	if _, err := e.Encode(b[:ParityLogEntrySize(16, 2)-1], g); err == nil {
		t.Error("Encode into a buffer one byte short accepted")
	}
	for _, tc := range []struct {
		name string
		f    func(*ParityLogEntry)
	}{
		{"zero UUID", func(e *ParityLogEntry) { e.Array = [16]byte{} }},
		{"seq 0", func(e *ParityLogEntry) { e.Seq = 0 }},
		{"seq 2^64-1", func(e *ParityLogEntry) { e.Seq = math.MaxUint64 }},
		{"stripe", func(e *ParityLogEntry) { e.Stripe = 4 }},
		{"rows", func(e *ParityLogEntry) { e.RowHi = 72 }},
		{"lost beyond", func(e *ParityLogEntry) { e.Logged = 16 }},
		{"written beyond", func(e *ParityLogEntry) { e.Written = 17 }},
		{"parity", func(e *ParityLogEntry) { e.Parity = 1 }},
		{"short P", func(e *ParityLogEntry) { e.P = e.P[1:] }},
		{"no Q", func(e *ParityLogEntry) { e.Q = nil }},
	} {
		bad := e
		tc.f(&bad)
		if _, err := bad.Encode(b, g); !errors.Is(err, ErrInvalidParityLogEntry) {
			t.Errorf("%s: Encode gave %v", tc.name, err)
		}
	}
}

func TestParityLogMathRefuses(t *testing.T) {
	p, err := NewParity(4, true)
	if err != nil {
		t.Fatal(err)
	}
	d := randChunks(rand.New(rand.NewPCG(1, 1)), 4, 4096)
	l := randChunks(rand.New(rand.NewPCG(2, 2)), 2, 4096)
	for _, lost := range []uint64{1 << 4, 1 << 63, 0b10101} {
		if p.LogParity(d, lost, l) == nil {
			t.Errorf("LogParity with lost %#x accepted", lost)
		}
		if p.RecoverParity(l, d, lost, l) == nil {
			t.Errorf("RecoverParity with lost %#x accepted", lost)
		}
	}
	if p.LogParity(d, 1, l[:1]) == nil || p.LogParity(d[:3], 1, l) == nil {
		t.Error("LogParity with the wrong number of chunks accepted")
	}
	short := [][]byte{d[0][:512], d[1], d[2], d[3]}
	if p.LogParity(short, 1, l) == nil || p.RecoverParity(l, short, 2, l) == nil {
		t.Error("chunks of different sizes accepted")
	}
	// The lost slots' chunks are not read by RecoverParity, the others'
	// not by LogParity.
	if err := p.LogParity([][]byte{d[0], nil, nil, nil}, 1, l); err != nil {
		t.Error(err)
	}
	if err := p.RecoverParity(l, [][]byte{nil, d[1], d[2], d[3]}, 1, l); err != nil {
		t.Error(err)
	}
}

func TestParityLogDoesNotAllocate(t *testing.T) {
	g, e, b := plogFixture(t)
	p, err := NewParity(g.DataMembers(), true)
	if err != nil {
		t.Fatal(err)
	}
	n := len(e.P)
	d := randChunks(rand.New(rand.NewPCG(7, 8)), 4, n)
	lp, lq := ParityLogPayload(b, 16, 2)
	out := [][]byte{make([]byte, n), make([]byte, n)}
	log := [][]byte{lp, lq}
	e.P, e.Q = lp, lq
	var decErr error
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"LogParity", func() { _ = p.LogParity(d, 0b0011, log) }},
		{"Encode", func() { _, _ = e.Encode(b, g) }},
		{"Decode", func() { _, decErr = DecodeParityLogEntry(b, g, plogUUID) }},
		{"RecoverParity", func() { _ = p.RecoverParity(log, d, 0b0011, out) }},
	} {
		if a := testing.AllocsPerRun(50, c.f); a != 0 {
			t.Errorf("%s: %v allocations per call", c.name, a)
		}
	}
	if decErr != nil {
		t.Fatal(decErr) // the allocation count of a failing decode says nothing
	}
}

// FuzzDecodeParityLogEntry: nothing panics, every error is classified,
// and an accepted entry re-encodes to the very bytes it came from. Run it
// with
//
//	go test ./engine -run '^$' -fuzz FuzzDecodeParityLogEntry -fuzztime 60s -fuzzminimizetime 2s
//
// (minimizing a new input of several KiB for the default 60 s stalls a
// short run).
func FuzzDecodeParityLogEntry(f *testing.F) {
	g := ParityGeometry{Level: Level6, Members: 6, Layout: LeftSymmetric, ChunkSectors: 64, MemberSectors: 256}
	e := ParityLogEntry{Array: plogUUID, Seq: 7, Stripe: 3, RowLo: 8, RowHi: 16, Logged: 0b0011, Written: 0b0110, Parity: 2,
		P: bytes.Repeat([]byte{1}, 4096), Q: bytes.Repeat([]byte{2}, 4096)}
	b := make([]byte, ParityLogEntrySize(8, 2))
	if _, err := e.Encode(b, g); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:ParityLogHeaderSize])
	f.Add(make([]byte, ParityLogHeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeParityLogEntry(b, g, plogUUID)
		if err != nil {
			if !errors.Is(err, ErrParityLogCorrupt) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		size := ParityLogEntrySize(e.RowHi-e.RowLo, e.Parity)
		c := make([]byte, size)
		if _, err := e.Encode(c, g); err != nil {
			t.Fatalf("decoded entry does not encode: %v", err)
		}
		if !bytes.Equal(c, b[:size]) {
			t.Fatal("re-encoding differs from the decoded block")
		}
	})
}
