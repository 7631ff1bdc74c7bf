package main

import (
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// grow: bad usage exits 2 without asking the daemon; a refusal from the
// daemon exits 1 in one line.
func TestGrowCLI(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	if _, stderr, code := runCLI("add", "--socket", sock, "--level", "1", "/dev/a", "/dev/b"); code != 0 {
		t.Fatalf("add: exit %d %s", code, stderr)
	}
	before := fake.Requests.Load()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"grow", "--size", "max"}, "needs -n"},
		{[]string{"grow", "-n", "0"}, "--size"},
		{[]string{"grow", "-n", "0", "--size", ""}, "--size"},
		{[]string{"grow", "-n", "0", "--size", "lots"}, "not a size"},
		{[]string{"grow", "-n", "0", "--size", "99999999999G"}, "too large"},
		{[]string{"grow", "-n", "0", "--size", "512"}, "at least 4K"},
		{[]string{"grow", "-n", "0", "--size", "max", "/dev/x"}, "expected 0 argument"},
		{[]string{"grow", "-n", "x", "--size", "max"}, "invalid argument"},
	} {
		_, stderr, code := runCLI(append(tc.args, "--socket", sock)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
		if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
			t.Errorf("%v: error is %d lines, want one", tc.args, n+1)
		}
	}
	if n := fake.Requests.Load(); n != before {
		t.Fatalf("bad usage reached the daemon (%d requests)", n-before)
	}
	for _, args := range [][]string{{"grow", "-n", "0", "--size", "max"}, {"grow", "-n", "7", "--size", "2G"}} {
		_, stderr, code := runCLI(append(args, "--socket", sock)...)
		if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 in one line", args, code, stderr)
		}
	}
}
