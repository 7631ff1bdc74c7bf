package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

func revMembers(t *testing.T, n int, size int64) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i := range n {
		p := filepath.Join(dir, string(rune('a'+i)))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// Found by review. Examine's text shows the write-intent bitmap (its JSON has
// bitmap_offset_bytes and bitmap_bytes), as mdadm --examine shows
// "Internal Bitmap : 8 sectors from superblock".
func TestExamineTextShowsBitmap(t *testing.T) {
	paths := revMembers(t, 2, 64<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	if a.Bitmap == nil {
		t.Fatal("no bitmap")
	}
	a.SetClean(true)
	a.Close()
	out, stderr, code := runCLI("examine", paths[0])
	if code != 0 {
		t.Fatalf("exit %d %q", code, stderr)
	}
	body := strings.ReplaceAll(out, paths[0], "MEMBER") // (the test's name is in the path)
	if !strings.Contains(strings.ToLower(body), "bitmap") {
		t.Errorf("examine of a raid1 member with a bitmap does not mention it:\n%s", out)
	}
}

// Found by review. A raid1 has no chunks: detail leaves Chunk Size out for it, mdadm
// --examine of a raid1 member prints none; examine prints the chunk of
// the superblock (512K, the API's default put in every request).
func TestExamineRaid1NoChunk(t *testing.T) {
	paths := revMembers(t, 2, 32<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, ChunkSectors: 1024, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	a.SetClean(true)
	a.Close()
	out, _, _ := runCLI("examine", paths[0])
	if strings.Contains(out, "Chunk Size") {
		t.Errorf("examine of a raid1 member prints a chunk size:\n%s", out)
	}
}

// Found by review. Examine of a member that cannot hold what its superblock says (a
// truncated device): assembly refuses it as a corrupt superblock,
// examine-bitmap too (CheckMemberSize); examine prints its data area as
// if whole, exit 0, not a word of it.
func TestExamineTruncatedMember(t *testing.T) {
	paths := revMembers(t, 2, 32<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	a.SetClean(true)
	a.Close()
	if err := os.Truncate(paths[1], 4<<20); err != nil {
		t.Fatal(err)
	}
	_, berr, bcode := runCLI("examine-bitmap", paths[1])
	out, stderr, code := runCLI("examine", paths[1])
	if code == 0 && !strings.Contains(out+stderr, "past the member's end") {
		t.Errorf("examine of a truncated member: exit 0, no warning (examine-bitmap: exit %d %q):\n%s", bcode, strings.TrimSpace(berr), out)
	}
}
