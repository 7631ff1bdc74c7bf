package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (run): a raid1/10 without a bitmap stopped cleanly part-way
// through its resync records "not clean, resync from sector N" (md's
// resync_offset: array.cleanState; a dirty mark always records 0), and
// the next start resumes the resync at N instead of starting it over.
// examine, "like mdadm --examine", prints such a member as "State :
// active (not cleanly stopped)" and shows no resync offset anywhere (text
// or -o json), where mdadm --examine shows "State : clean" and "Resync
// Offset : N sectors": the operator is told the array crashed and will be
// resynced in full, neither of which is true.
func TestReviewRunExamineResyncOffset(t *testing.T) {
	paths := revMembers(t, 2, 64<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// As a clean stop writes it once the resync reached sector 8192.
	const off = 8192
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, engine.SuperblockSize)
		if _, err := f.ReadAt(b, engine.SuperblockOffset); err != nil {
			t.Fatal(err)
		}
		sb, err := engine.ParseSuperblock(b)
		if err != nil {
			t.Fatal(err)
		}
		if sb.Clean {
			t.Fatal("premise: a new array without a bitmap, its sync pending, is marked clean")
		}
		sb.ResyncOffset = off
		nb, err := sb.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(nb, engine.SuperblockOffset); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	text, stderr, code := runCLI("examine", paths[0])
	if code != 0 {
		t.Fatalf("examine: exit %d: %s", code, stderr)
	}
	js, _, _ := runCLI("examine", "-o", "json", paths[0])
	var j map[string]any
	if err := json.Unmarshal([]byte(js), &j); err != nil {
		t.Fatal(err)
	}
	_, inJSON := j["resync_offset_sectors"]
	if strings.Contains(text, "not cleanly stopped") || !strings.Contains(text, "8192") || !inJSON {
		t.Fatalf("examine of a member stopped cleanly with its resync at sector %d: text says the array was not cleanly stopped and/or shows no resync offset (json has resync_offset_sectors: %v):\n%s",
			off, inJSON, strings.TrimSpace(text))
	}
}
