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

// Found by review: since 6645fb6 assembly takes a bitmap header more than
// one generation ahead of the superblock as corrupt (bitmap.Load: "header
// events N are more than one update ahead of the superblock's": the copy
// is not used, and with no other usable copy every region is dirty).
// examine-bitmap, which README says "says when it is older than the
// superblock and would not be trusted" (like mdadm -X), prints such a copy
// as a normal, trusted bitmap: stale false, no word that assembly ignores
// it. An operator examining why the array resynced in full is told the
// copy is fine.
func TestReviewBitmapExamineHeaderFarAhead(t *testing.T) {
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

	f, err := os.OpenFile(paths[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	area := make([]byte, min(sb.BitmapBytes, bitmap.MaxCopyBytes))
	if _, err := f.ReadAt(area, int64(sb.BitmapOffset)); err != nil {
		t.Fatal(err)
	}
	h, err := bitmap.DecodeHeader(area)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Geometry(sb.BitmapOffset, sb.BitmapBytes)
	if err != nil {
		t.Fatal(err)
	}
	blk := make([]byte, g.BlockSize)
	ahead := h.Events + 10
	bitmap.EncodeHeader(blk, &g, ahead, h.EventsCleared)
	if _, err := f.WriteAt(blk, int64(g.Start)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// What assembly makes of that copy.
	cfg := bitmap.Config{ArrayUUID: sb.ArrayUUID, ArraySectors: h.ArraySectors, AreaOffset: sb.BitmapOffset,
		AreaBytes: sb.BitmapBytes, Events: h.Events}
	_, info, _ := bitmap.Load(cfg, [][]byte{nil, readArea(t, paths[1], sb)}, bitmap.Options{})
	if info.Copies[1].Err == nil {
		t.Fatalf("premise: Load uses a header %d generations ahead", ahead-h.Events)
	}

	out, stderr, code := runCLI("examine-bitmap", "-o", "json", paths[1])
	text, _, _ := runCLI("examine-bitmap", paths[1])
	var j examineBitmapJSON
	if code != 0 {
		// A refusal that says why is fine too.
		if !strings.Contains(stderr, "ahead") {
			t.Fatalf("examine-bitmap: exit %d: %s", code, stderr)
		}
		return
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if !j.Stale && !strings.Contains(text, "not trusted") && !strings.Contains(text, "ahead") {
		t.Fatalf("examine-bitmap shows a copy assembly ignores (%v) as trusted: stale=%v, text:\n%s", info.Copies[1].Err, j.Stale, text)
	}
}

func readArea(t *testing.T, path string, sb engine.Superblock) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	area := make([]byte, min(sb.BitmapBytes, bitmap.MaxCopyBytes))
	if _, err := f.ReadAt(area, int64(sb.BitmapOffset)); err != nil {
		t.Fatal(err)
	}
	return area
}
