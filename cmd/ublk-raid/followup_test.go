package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// mirrorFiles makes a clean raid1 with a bitmap over two sparse files of
// size bytes and returns them.
func mirrorFiles(t *testing.T, size int64) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	return paths
}

// craftSuperblock rewrites p's superblock after edit.
func craftSuperblock(t *testing.T, p string, edit func(sb *engine.Superblock)) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, engine.SuperblockSize)
	if _, err := f.ReadAt(b, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	sb, err := engine.ParseSuperblock(b)
	if err != nil {
		t.Fatal(err)
	}
	edit(sb)
	if b, err = sb.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
}

// examine-bitmap bounds the superblock by its device before it reads the
// bitmap area, as assembly does: a superblock whose data area ends past
// the member's end is reported, not trusted.
func TestExamineBitmapChecksMemberSize(t *testing.T) {
	const size = 64 << 20
	p := mirrorFiles(t, size)[1]
	craftSuperblock(t, p, func(sb *engine.Superblock) { sb.DataSectors = (size-sb.DataOffset)>>9 + 8 })
	_, stderr, code := runCLI("examine-bitmap", p)
	if code != exitError || !strings.Contains(stderr, "past the member's end") || strings.Contains(stderr, "\n") {
		t.Fatalf("examine-bitmap of a superblock larger than its member: exit %d, %q; want exit 1 naming the member's end", code, stderr)
	}
}

// examine-bitmap reads at most bitmap.MaxCopyBytes of a bitmap area,
// however large the superblock says it is (up to 128 MiB), and still
// decodes the copy.
func TestExamineBitmapReadsAtMostMaxCopyBytes(t *testing.T) {
	const size = 256 << 20
	p := mirrorFiles(t, size)[1]
	craftSuperblock(t, p, func(sb *engine.Superblock) {
		sb.BitmapBytes = engine.MaxBitmapBytes
		sb.DataOffset = (sb.BitmapOffset + sb.BitmapBytes + 1<<20 - 1) &^ (1<<20 - 1)
		sb.DataSectors = (size - sb.DataOffset) >> 9 &^ 7
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, stderr, code := runCLI("examine-bitmap", p)
	runtime.ReadMemStats(&after)
	if code != 0 || !strings.Contains(out, "Region Size") {
		t.Fatalf("examine-bitmap: exit %d, %q\n%s", code, stderr, out)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Fatalf("examine-bitmap allocated %d bytes for a 128 MiB bitmap area; want at most a few MiB (bitmap.MaxCopyBytes)", got)
	}
}
