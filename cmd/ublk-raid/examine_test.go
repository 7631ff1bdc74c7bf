package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

func TestExamine(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, n := range []string{"a", "b", "c"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 32<<20); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	a, err := array.Open(paths[:2], array.CreateSpec{Name: "tank", Level: engine.Level1, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()

	out, stderr, code := runCLI("examine", "-o", "json", paths[1])
	if code != 0 {
		t.Fatalf("examine: exit %d: %s", code, stderr)
	}
	var j examineJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("examine -o json: %v\n%s", err, out)
	}
	if j.Name != "tank" || j.Level != "raid1" || j.Role == nil || *j.Role != 1 || !j.Clean || j.Events < 2 ||
		len(j.Roles) != 2 || j.Roles[0].State != "active" || j.DataOffset%(1<<20) != 0 {
		t.Fatalf("examine: %+v", j)
	}
	out, _, code = runCLI("examine", paths[0])
	if code != 0 || !regexp.MustCompile(`Raid Level +: raid1\n`).MatchString(out) || !regexp.MustCompile(`Device Role +: 0\n`).MatchString(out) {
		t.Fatalf("examine text (exit %d):\n%s", code, out)
	}
	_, stderr, code = runCLI("examine", paths[2])
	if code != exitError || !strings.Contains(stderr, "no ublk-raid superblock") {
		t.Fatalf("examine of a blank member: exit %d, %q", code, stderr)
	}
	if _, _, code = runCLI("examine", "-o", "yaml", paths[0]); code != exitUsage {
		t.Fatalf("-o yaml: exit %d", code)
	}
}

func TestExamineBitmap(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 64<<20); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, RegionSectors: 128 << 1}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	regions := a.Bitmap.Geometry().Regions
	a.Close()
	out, stderr, code := runCLI("examine-bitmap", "-o", "json", paths[1])
	if code != 0 {
		t.Fatalf("examine-bitmap: exit %d: %s", code, stderr)
	}
	var j examineBitmapJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if j.RegionBytes != 128<<10 || j.Regions != regions || j.NeverWritten != regions || j.Dirty != 0 || j.Stale || j.Events < j.SBEvents ||
		j.Version != bitmap.Version || j.Cleared < 1 || j.Cleared > j.Events {
		t.Fatalf("examine-bitmap of a new array: %+v", j)
	}
	out, _, code = runCLI("examine-bitmap", paths[0])
	if code != 0 || !regexp.MustCompile(`Region Size +: 128K`).MatchString(out) || !strings.Contains(out, "0 dirty") ||
		!strings.Contains(out, fmt.Sprintf("Events Cleared : %d\n", j.Cleared)) {
		t.Fatalf("examine-bitmap text (exit %d):\n%s", code, out)
	}
}
