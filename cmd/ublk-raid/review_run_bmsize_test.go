package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (run): examine-bitmap says when assembly would not use a copy
// (ec3f523: more than one update ahead, another array's), as mdadm -X. A
// copy whose header covers another size than the array's is not used by
// assembly either (bitmap.Load, checkHeader: ErrMismatch "the bitmap
// covers N sectors, the array has M"; with no other usable copy every
// region is dirty), yet examine-bitmap prints it as a good, trusted copy:
// the operator asking why the array resynced in full is told it is fine.
func TestReviewRunExamineBitmapSizeMismatch(t *testing.T) {
	paths := revMembers(t, 2, 64<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	sb := *a.SBs[1]
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()

	area := readArea(t, paths[1], sb)
	h, err := bitmap.DecodeHeader(area)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Geometry(sb.BitmapOffset, sb.BitmapBytes)
	if err != nil {
		t.Fatal(err)
	}
	arraySectors := h.ArraySectors
	g.ArraySectors = arraySectors - 8 // same regions, another size
	blk := make([]byte, g.BlockSize)
	bitmap.EncodeHeader(blk, &g, h.Events, h.EventsCleared)
	f, err := os.OpenFile(paths[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(blk, int64(g.Start)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// What assembly makes of that copy.
	cfg := bitmap.Config{ArrayUUID: sb.ArrayUUID, ArraySectors: arraySectors, AreaOffset: sb.BitmapOffset,
		AreaBytes: sb.BitmapBytes, Events: sb.Events}
	_, info, _ := bitmap.Load(cfg, [][]byte{nil, readArea(t, paths[1], sb)}, bitmap.Options{})
	if info.Copies[1].Err == nil {
		t.Fatal("premise: Load uses a header of another size")
	}

	out, stderr, code := runCLI("examine-bitmap", "-o", "json", paths[1])
	if code != 0 {
		t.Fatalf("examine-bitmap: exit %d: %s", code, stderr)
	}
	var j examineBitmapJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	text, _, _ := runCLI("examine-bitmap", paths[1])
	if j.Corrupt == "" && !j.Stale {
		t.Fatalf("examine-bitmap shows a copy assembly does not use (%v) as good: corrupt %q, stale %v, text:\n%s",
			info.Copies[1].Err, j.Corrupt, j.Stale, strings.TrimSpace(text))
	}
}
