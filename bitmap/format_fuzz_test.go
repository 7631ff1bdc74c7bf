package bitmap

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// FuzzDecodeHeader feeds arbitrary bytes to the bitmap header parser, as
// a header block and as a whole reserved area at areaOffset of areaBytes
// (the seed corpus, valid encodings and crafted invalid ones, is in
// testdata/fuzz). Properties: nothing panics; every error is classified; a
// decoded header's fields are within the format's bounds, it re-encodes to
// the very bytes it came from, and its layout in the area (if it fits)
// stays inside the area and inside MaxCopyBytes; Examine and Load of the
// bytes as an area never panic.
//
// Run it with
//
//	go test ./bitmap -run '^$' -fuzz FuzzDecodeHeader -fuzztime 60s -fuzzminimizetime 2s
//
// (minimizing each new input for the default 60 s would take a whole short
// run); keep any crasher's input in testdata/fuzz/FuzzDecodeHeader.
func FuzzDecodeHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, areaOffset, areaBytes uint64) {
		h, err := DecodeHeader(b)
		if err != nil {
			if len(b) >= MinBlockSize && !errors.Is(err, ErrNoBitmap) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unclassified error: %v", err)
			}
		} else {
			checkDecodedHeader(t, b, h, areaOffset, areaBytes)
		}
		// The bytes as a member's reserved area.
		if s, err := Examine(b, areaOffset); err == nil {
			if s.Geometry.UsedBytes() > uint64(len(b)) {
				t.Fatalf("Examine: a copy of %d bytes in an area of %d", s.Geometry.UsedBytes(), len(b))
			}
		}
		if err == nil && h.Regions <= 1<<12 {
			cfg := Config{ArrayUUID: h.ArrayUUID, ArraySectors: h.ArraySectors, AreaOffset: areaOffset,
				AreaBytes: uint64(len(b)), Events: max(1, h.Events)}
			if bm, _, err := Load(cfg, [][]byte{b, nil}, Options{}); err == nil && bm.Geometry().Regions != h.Regions {
				t.Fatalf("Load: %d regions, the header says %d", bm.Geometry().Regions, h.Regions)
			}
		}
	})
}

func checkDecodedHeader(t *testing.T, b []byte, h Header, areaOffset, areaBytes uint64) {
	t.Helper()
	bs := h.BlockSize
	switch {
	case bs < MinBlockSize || bs > MaxBlockSize || bs&(bs-1) != 0 || bs > len(b):
		t.Fatalf("block size %d", bs)
	case h.Events == 0 || h.Events == math.MaxUint64:
		t.Fatalf("events %d", h.Events)
	case h.EventsCleared == 0 || h.EventsCleared > h.Events || h.Version == VersionV1 && h.EventsCleared != h.Events:
		t.Fatalf("version %d: events cleared %d, events %d", h.Version, h.EventsCleared, h.Events)
	case h.RegionSectors < MinRegionSectors || h.RegionSectors&(h.RegionSectors-1) != 0:
		t.Fatalf("region size %d", h.RegionSectors)
	case h.Regions < 1 || h.Regions > MaxRegions || uint64(h.Regions) != ceilDiv(h.ArraySectors, h.RegionSectors):
		t.Fatalf("%d regions of %d sectors for %d sectors", h.Regions, h.RegionSectors, h.ArraySectors)
	case h.DataBlocks != (h.Regions+bs-TrailerSize-1)/(bs-TrailerSize):
		t.Fatalf("%d data blocks for %d regions", h.DataBlocks, h.Regions)
	}
	// Re-encoding gives the same block.
	g, err := h.Geometry(8192, math.MaxUint64)
	if err != nil {
		t.Fatalf("a valid header does not fit an unbounded area: %v", err)
	}
	enc := make([]byte, bs)
	EncodeHeader(enc, &g, h.Events, h.EventsCleared)
	if h.Version == Version && !bytes.Equal(enc, b[:bs]) {
		t.Fatalf("re-encoded header differs")
	}
	// A version 1 header is rewritten in the current version.
	want := h
	want.Version = Version
	if again, err := DecodeHeader(enc); err != nil || again != want {
		t.Fatalf("re-encoded header decodes to %+v, %v; want %+v", again, err, want)
	}
	// Its layout in the given area.
	g, err = h.Geometry(areaOffset, areaBytes)
	if err != nil {
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("Geometry error not ErrMismatch: %v", err)
		}
		return
	}
	if g.Start < areaOffset || g.UsedBytes() > areaBytes || g.UsedBytes() > MaxCopyBytes {
		t.Fatalf("layout from %d spanning %d bytes in an area at %d of %d bytes (MaxCopyBytes %d)",
			g.Start, g.UsedBytes(), areaOffset, areaBytes, MaxCopyBytes)
	}
}
