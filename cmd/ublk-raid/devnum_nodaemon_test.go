package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Found by review. A device number beyond any ublk device is bad usage
// (exit 2, one line naming it) whether or not a daemon runs: the value is
// wrong in itself, as del -n 1048576 and add -n 1048576 MEMBER... said
// without a daemon. The daemon's commands that take -n N only learned it
// from the daemon's 400, so with no daemon they answered "no daemon
// running" (exit 1) instead.
func TestDeviceNumberOutOfRangeNoDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "control.sock") // no daemon
	m := filepath.Join(t.TempDir(), "m")
	for _, args := range [][]string{
		{"detail", "-n", "1048576"},
		{"fail", "-n", "1048576", m},
		{"remove", "-n", "1048576", m},
		{"re-add", "-n", "1048576", m},
		{"replace", "-n", "1048576", m},
		{"check", "-n", "1048576"},
		{"repair", "-n", "1048576"},
		{"grow", "-n", "1048576", "--size", "max"},
		{"add", "-n", "1048576", "--spare", m},
	} {
		_, stderr, code := runCLI(withSocket(sock, args)...)
		if code != exitUsage || !strings.Contains(stderr, "1048576") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming the number", args, code, stderr, exitUsage)
		}
	}
	// The reference: the same number is bad usage here without a daemon.
	for _, args := range [][]string{{"del", "-n", "1048576"}, {"add", "-n", "1048576", "--level", "1", m, m + "2"}} {
		if _, stderr, code := runCLI(withSocket(sock, args)...); code != exitUsage {
			t.Fatalf("%v: exit %d %q", args, code, stderr)
		}
	}
}
