package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Found by review. Review (run): a recovery re-attaches a device the kernel already holds,
// with the queues, depth and I/O size it was made with (ublk.Recover
// takes them from GET_DEV_INFO; Config.Queues, Depth and MaxIOBytes are
// never read). -q, -d and --max-io given to `run --recover` or `recover`
// are dropped unsaid: the command prints the device and serves it with
// other values than the ones asked for. The project refuses such flags
// where they would be dropped (add -n N --spare: "-q/--queues describes a
// new array or its device", exit 2), and run --recover refuses the other
// flags that describe what it does not make (--level, --chunk...): these
// must be bad usage too, one line, exit 2, before anything is opened.
// (Device 1048575: a number no host has, should the test run where the
// driver is loaded.)
func TestReviewRunRecoverRefusesDeviceShapeFlags(t *testing.T) {
	dir := t.TempDir()
	var members []string
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, make([]byte, 8<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		members = append(members, p)
	}
	for _, f := range [][]string{{"-q", "3"}, {"-d", "64"}, {"--max-io", "1M"}} {
		for _, cmd := range [][]string{
			append([]string{"run", "--recover", "-n", "1048575"}, members...),
			{"recover", "-n", "1048575", members[0]},
		} {
			args := append(append([]string{cmd[0]}, f...), cmd[1:]...)
			_, stderr, code := runCLI(args...)
			if code != exitUsage {
				t.Errorf("%v: exit %d (%q); want exit %d: %s is not what the recovered device gets (the kernel's values are used)",
					args, code, strings.TrimSpace(stderr), exitUsage, f[0])
			}
		}
	}
	for _, p := range members {
		if b, _ := os.ReadFile(p); !bytes.Equal(b, make([]byte, 8<<20)) {
			t.Errorf("%s was written", p)
		}
	}
}
