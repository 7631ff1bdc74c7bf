package main

import (
	"strings"
	"testing"
)

// Found by review. cobra's built-in `completion` command is part of the CLI (listed by
// --help) but escapes its usage rules: README, "Exit codes: ... 2 bad
// usage (nothing is touched: an unknown command, ...); errors are one
// line". An unknown subcommand or an extra argument under it exits 1; an
// unknown shell prints the help and exits 0.
func TestReviewCliCompletionBadUsageExitsTwo(t *testing.T) {
	for _, args := range [][]string{{"completion", "bash", "extra"}, {"completion", "tcsh"}} {
		out, stderr, code := runCLI(args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d (want %d, bad usage), stderr %q, stdout %d bytes", args, code, exitUsage, strings.TrimSpace(stderr), len(out))
		}
	}
}
