package engine

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// ScanParityLogFrom finds exactly ScanParityLog's entries (keeping only
// those keep accepts, payloads copied) over random raid5/6 areas of any
// 4 KiB multiple: entries anywhere (overlapping, torn, foreign, ending at
// the area's end), garbage and zeroed blocks, every window from the
// smallest allowed to past the area; reads stay aligned and in the area.
func TestParityLogScanFromMatchesScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		level := rapid.SampledFrom([]Level{Level5, Level6}).Draw(t, "level")
		minM := 3
		if level == Level6 {
			minM = 4
		}
		members := rapid.IntRange(minM, 8).Draw(t, "members")
		chunk := uint64(8) << rapid.IntRange(0, 5).Draw(t, "chunkShift")
		stripes := rapid.Uint64Range(1, 8).Draw(t, "stripes")
		g := ParityGeometry{Level: level, Members: members, Layout: LeftSymmetric, ChunkSectors: chunk, MemberSectors: chunk * stripes}
		pc := g.ParityMembers()
		blocks := rapid.IntRange(1, 160).Draw(t, "blocks")
		areaBytes := blocks * 4096
		area := make([]byte, areaBytes)
		for b := 1; b < blocks; b++ {
			if rapid.IntRange(0, 3).Draw(t, "fill") == 1 {
				seed := byte(rapid.IntRange(1, 255).Draw(t, "garbage"))
				for i := range 4096 {
					area[b*4096+i] = seed * byte(i+1)
				}
			}
		}
		data := uint64(1)<<uint(g.DataMembers()) - 1
		for range rapid.IntRange(0, 24).Draw(t, "entries") {
			lo := rapid.Uint64Range(0, chunk-1).Draw(t, "lo")
			hi := rapid.Uint64Range(lo+1, chunk).Draw(t, "hi")
			e := ParityLogEntry{Array: plogUUID, Seq: rapid.Uint64Range(1, 40).Draw(t, "seq"),
				Stripe: rapid.Uint64Range(0, stripes-1).Draw(t, "stripe"), RowLo: lo, RowHi: hi,
				Logged:  rapid.Uint64Range(0, data).Draw(t, "logged"),
				Written: rapid.Uint64Range(1, data).Draw(t, "written"), Parity: pc}
			if rapid.IntRange(0, 9).Draw(t, "foreign") == 0 {
				e.Array = [16]byte{9}
			}
			if e.Logged != 0 {
				sz := int(hi-lo) * 512
				e.P = bytes.Repeat([]byte{byte(e.Seq)}, sz)
				if pc == 2 {
					e.Q = bytes.Repeat([]byte{byte(e.Seq) ^ 0x5a}, sz)
				}
			}
			size := int(roundUp(uint64(e.Size()), 4096))
			if size > areaBytes-4096 {
				continue
			}
			last := (areaBytes - size) / 4096
			off := last * 4096
			if rapid.IntRange(0, 4).Draw(t, "atEnd") != 0 {
				off = rapid.IntRange(1, last).Draw(t, "off") * 4096
			}
			if _, err := e.Encode(area[off:], g); err != nil {
				t.Fatal(err)
			}
			if rapid.IntRange(0, 7).Draw(t, "torn") == 0 {
				area[off+rapid.IntRange(0, e.Size()-1).Draw(t, "tornAt")] ^= 0x10
			}
		}
		want := ScanParityLog(area, g, plogUUID)
		minW := int(roundUp(uint64(MaxParityLogEntrySize(g, areaBytes)), 4096))
		w := minW + 4096*rapid.IntRange(0, blocks+1).Draw(t, "extra")
		cut := rapid.Uint64Range(1, 41).Draw(t, "checkpoint")
		read := func(off int64, b []byte) error {
			if off%4096 != 0 || len(b)%4096 != 0 || off < 4096 || int(off)+len(b) > areaBytes {
				t.Fatalf("read of %d bytes at %d of a %d-byte area", len(b), off, areaBytes)
			}
			copy(b, area[off:])
			return nil
		}
		buf := make([]byte, w)
		got, err := ScanParityLogFrom(read, areaBytes, buf, g, plogUUID, func(e *ParityLogEntry) bool { return e.Seq >= cut })
		if err != nil {
			t.Fatal(err)
		}
		var kept []ParityLogEntry
		for _, e := range want {
			if e.Seq >= cut {
				kept = append(kept, e)
			}
		}
		if len(got) != len(kept) {
			t.Fatalf("window %d: %d entries, ScanParityLog kept %d", w, len(got), len(kept))
		}
		for i := range got {
			a, b := got[i], kept[i]
			if a.Array != b.Array || a.Seq != b.Seq || a.Stripe != b.Stripe || a.RowLo != b.RowLo || a.RowHi != b.RowHi ||
				a.Logged != b.Logged || a.Written != b.Written || a.Parity != b.Parity ||
				!bytes.Equal(a.P, b.P) || !bytes.Equal(a.Q, b.Q) {
				t.Fatalf("window %d: entry %d is %+v, want %+v", w, i, a, b)
			}
		}
		for i := range buf {
			buf[i] ^= 0xff
		}
		for i := range got {
			if !bytes.Equal(got[i].P, kept[i].P) || !bytes.Equal(got[i].Q, kept[i].Q) {
				t.Fatalf("entry %d's payload aliases the window", i)
			}
		}
	})
}
