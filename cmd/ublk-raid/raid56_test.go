package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
	"github.com/ublk-raid/ublk-raid/engine"
)

// raid5/6 on the command line: too few members, a layout not of the
// level, a bad chunk exit 2 with one line naming the flag, as for the
// other levels: nothing reaches the daemon and no member is written. A
// valid request reaches it.
func TestParityUsage(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	dir := t.TempDir()
	var m []string
	for i := range 5 {
		p := filepath.Join(dir, "m"+string(rune('0'+i)))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 8<<20); err != nil {
			t.Fatal(err)
		}
		m = append(m, p)
	}
	with := func(args ...string) func(n int) []string {
		return func(n int) []string { return append(append([]string(nil), args...), m[:n]...) }
	}
	for _, cmd := range []string{"add", "run"} {
		for _, tc := range []struct {
			args func(n int) []string
			n    int
			want string
		}{
			{with(cmd, "--level", "5"), 2, "members: raid5 needs 3 to 64 members, not 2"},
			{with(cmd, "--level", "raid6"), 3, "raid6 needs 4 to 64 members, not 3"},
			{with(cmd, "--level", "5", "--layout", "n2"), 3, `--layout "n2": invalid raid5/6 layout`},
			{with(cmd, "--level", "6", "--layout", "f2"), 4, `--layout "f2": invalid raid5/6 layout`},
			{with(cmd, "--level", "10", "--layout", "ls"), 4, `--layout "ls": invalid raid10 layout`},
			{with(cmd, "--level", "1", "--layout", "rs"), 2, "is for raid5, raid6 and raid10 only"},
			{with(cmd, "--level", "5", "--chunk", "3K"), 3, "--chunk 3K"},
			{with(cmd, "--level", "6", "--chunk", "128M"), 4, "--chunk 128M"},
			{with(cmd, "--level", "5", "--write-mostly", m[0]), 3, "raid5 reads every member"},
		} {
			wantUsage(t, fake, sock, tc.args(tc.n), tc.want)
		}
	}
	// A valid request reaches the daemon (the fake writes nothing).
	out, stderr, code := runCLI(withSocket(sock, with("add", "--level", "6", "--layout", "ra", "--chunk", "64K")(5))...)
	if code != 0 || out != "/dev/ublkb0\n" {
		t.Fatalf("add --level 6: exit %d, %q %q", code, out, stderr)
	}
	if a, err := fake.Detail(0); err != nil || a.Level != "raid6" || a.ChunkBytes != 64<<10 || a.RaidDisks != 5 {
		t.Fatalf("the daemon got %+v, %v", a, err)
	}
	zero := make([]byte, 8<<20)
	for _, p := range m {
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, zero) {
			t.Fatalf("member %s was written (%v)", p, err)
		}
	}
}

// examine prints a raid5/6 member's level and md's layout name.
func TestExamineParity(t *testing.T) {
	for _, tc := range []struct {
		level  uint32
		layout engine.ParityLayout
		want   string
	}{
		{5, engine.LeftSymmetric, "left-symmetric"}, {5, engine.RightAsymmetric, "right-asymmetric"},
		{6, engine.LeftAsymmetric, "left-asymmetric"}, {6, engine.RightSymmetric, "right-symmetric"},
	} {
		dir := t.TempDir()
		spec := engine.ArraySpec{Name: "par", Level: tc.level, Layout: uint32(tc.layout), ChunkSectors: 128, LogBytes: 256 << 10}
		var paths []string
		for i := range 4 {
			p := filepath.Join(dir, "m"+string(rune('0'+i)))
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, 8<<20); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
			spec.MemberBytes = append(spec.MemberBytes, 8<<20)
		}
		sbs, err := engine.NewSuperblocks(spec)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range paths {
			b, err := sbs[i].MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt(b, engine.SuperblockOffset)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		level := fmt.Sprintf("raid%d", tc.level)
		out, stderr, code := runCLI("examine", paths[2])
		if code != 0 || !hasRow(out, "Raid Level : "+level) || !hasRow(out, "Layout : "+tc.want) ||
			!hasRow(out, "Chunk Size : 64K") || !hasRow(out, "Raid Devices : 4") || !hasRow(out, "Device Role : 2") ||
			!hasRow(out, fmt.Sprintf("Write-Hole Log : 512 sectors at sector %d", (sbs[2].DataOffset-256<<10)>>9)) {
			t.Fatalf("%s %s: examine exit %d %s:\n%s", level, tc.want, code, stderr, out)
		}
		out, _, code = runCLI("examine", "-o", "json", paths[0])
		var j examineJSON
		if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || j.Level != level || j.Layout != tc.want ||
			j.LogBytes != 256<<10 || j.LogOffset+j.LogBytes != j.DataOffset {
			t.Fatalf("%s %s: examine -o json exit %d (%v): %s", level, tc.want, code, err, out)
		}
	}
}
