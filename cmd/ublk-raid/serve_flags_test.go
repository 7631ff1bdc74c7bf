package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Found by review. serve --metrics-listen with a port out of range is a
// malformed value: bad usage, exit 2 before anything is opened. The check
// only asked for a non-empty port, so serve went on, took the control
// socket, and failed later in net.Listen with exit 1 (with no driver, it
// failed even earlier on /dev/ublk-control, also exit 1).
func TestServeMetricsPortOutOfRange(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "control.sock")
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:http"} {
		args := []string{"serve", "--socket", sock, "--state-file", "", "--metrics-listen", addr}
		_, stderr, code := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, "--metrics-listen") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming --metrics-listen", args, code, stderr, exitUsage)
		}
	}
}
