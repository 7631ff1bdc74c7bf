package main

import (
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// add -n N --spare DEV adds spares to a running array: the flags that
// describe a new array or its device are refused, as --level, --layout and
// --name are, not silently dropped (--write-mostly DEV did not make the
// spare write-mostly, --assume-clean did not spare it a rebuild).
func TestAddSpareRefusesNewArrayFlags(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	for _, extra := range [][]string{
		{"--write-mostly", "/dev/c"},
		{"--no-bitmap"},
		{"--assume-clean"},
		{"--bitmap-region", "1M"},
		{"--chunk", "64K"},
		{"--sync-speed-max", "10M"},
		{"-q", "2"},
		{"-d", "64"},
		{"--max-io", "1M"},
	} {
		args := append([]string{"add", "--socket", sock, "-n", "0", "--spare", "/dev/c"}, extra...)
		_, stderr, code := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, extra[0]) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", args, code, stderr, exitUsage, extra[0])
		}
	}
	if n := fake.Requests.Load(); n != 0 {
		t.Fatalf("refused commands reached the daemon %d times", n)
	}
}
