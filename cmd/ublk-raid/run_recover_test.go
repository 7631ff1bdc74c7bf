package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Found by review. run --recover -n N MEMBER... re-attaches to the device
// of an array that already exists: it must never create one. --level (the
// flag that makes run create an array on blank members) does not belong to
// --recover: bad usage, exit 2, before anything is opened. It was taken:
// with the driver loaded, array.Open(create) wrote new superblocks on
// blank members before ublk.CheckRecover refused the device; without the
// driver the command failed later, with exit 1.
func TestRunRecoverRefusesLevel(t *testing.T) {
	dir := t.TempDir()
	var members []string
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, make([]byte, 8<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		members = append(members, p)
	}
	args := append([]string{"run", "--recover", "-n", "0", "--level", "1"}, members...)
	_, stderr, code := runCLI(args...)
	if code != exitUsage || !strings.Contains(stderr, "--level") {
		t.Errorf("%v: exit %d, stderr %q; want exit %d naming --level", args, code, stderr, exitUsage)
	}
	// So are the other flags that describe a new array.
	for _, f := range [][]string{{"--layout", "f2"}, {"--chunk", "64K"}, {"--no-bitmap"}, {"--bitmap-region", "1M"}, {"--assume-clean"}} {
		args := append(append([]string{"run", "--recover", "-n", "0"}, f...), members...)
		if _, stderr, code := runCLI(args...); code != exitUsage || !strings.Contains(stderr, f[0]) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", args, code, stderr, exitUsage, f[0])
		}
	}
	for _, p := range members {
		if b, _ := os.ReadFile(p); !bytes.Equal(b, make([]byte, 8<<20)) {
			t.Errorf("%s was written", p)
		}
	}
}
