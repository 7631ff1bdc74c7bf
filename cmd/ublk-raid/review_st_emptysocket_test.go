package main

import (
	"strings"
	"testing"
)

// Found by review (st). `serve --socket ""` (an unset shell variable, as
// for `replace --with ""` and an empty MEMBER, both bad usage) is not
// refused as bad usage: serve goes on to open the driver (exit 1 here,
// without one) and, with the driver, Listen("") binds an unnamed
// (autobound) socket and then fails "control socket: chmod : no such file
// or directory", exit 1: a message that does not name the flag, after the
// control device was opened. Bad usage is exit 2 with one line naming
// the flag, before anything is opened.
func TestReviewstServeEmptySocketIsUsage(t *testing.T) {
	args := []string{"serve", "--socket", "", "--state-file", "", "--metrics-listen", ""}
	_, stderr, code := runCLI(args...)
	if code != exitUsage || !strings.Contains(stderr, "--socket") {
		t.Errorf("%q: exit %d, stderr %q; want exit %d naming --socket", args, code, strings.TrimSpace(stderr), exitUsage)
	}
}
