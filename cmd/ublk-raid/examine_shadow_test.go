package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// TestExamineTornPrimary: examine of a member whose primary superblock a
// power cut tore shows the shadow copy's update, and says it is the
// shadow.
func TestExamineTornPrimary(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 32<<20); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	a, err := array.Open(paths, array.CreateSpec{Name: "tank", Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	f, err := os.OpenFile(paths[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := make([]byte, 512)
	if _, err := f.ReadAt(sec, engine.SuperblockOffset+512); err != nil {
		t.Fatal(err)
	}
	sec[0] ^= 0xff // a sector of the update not written
	if _, err := f.WriteAt(sec, engine.SuperblockOffset+512); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI("examine", "-o", "json", paths[1])
	if code != 0 {
		t.Fatalf("examine: exit %d: %s", code, stderr)
	}
	var j examineJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("examine -o json: %v\n%s", err, out)
	}
	if !j.FromShadow || !j.Clean || j.Name != "tank" {
		t.Fatalf("examine: %+v, want the shadow copy of a clean superblock", j)
	}
	out, _, code = runCLI("examine", paths[1])
	if code != 0 || !regexp.MustCompile(`Superblock +: read from the shadow copy`).MatchString(out) {
		t.Fatalf("examine text (exit %d):\n%s", code, out)
	}
	out, _, _ = runCLI("examine", paths[0])
	if regexp.MustCompile(`Superblock +:`).MatchString(out) {
		t.Fatalf("examine of an intact member mentions the shadow:\n%s", out)
	}
}
