package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// raid5/6 on the command line: too few members, a layout not of the
// level, a bad chunk exit 2 with one line naming the flag, as for the
// other levels; a valid raid5/6 request is refused the same way (not
// served yet). Nothing reaches the daemon and no member is written.
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
			{with(cmd, "--level", "5"), 3, `--level "5": raid5/6 arrays are not served yet`},
			{with(cmd, "--level", "6", "--layout", "ra", "--chunk", "64K"), 5, `--level "6": raid5/6 arrays are not served yet`},
			{with(cmd, "--level", "5", "--layout", "left-asymmetric", "--spare", m[4]), 4, "not served yet"},
		} {
			wantUsage(t, fake, sock, tc.args(tc.n), tc.want)
		}
	}
	zero := make([]byte, 8<<20)
	for _, p := range m {
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, zero) {
			t.Fatalf("member %s was written (%v)", p, err)
		}
	}
}
