package main

import (
	"context"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// `replace --with ""` (an unset shell variable) is bad usage: it must not
// reach the daemon, where an empty "with" means "the first spare".
func TestReplaceEmptyWithIsUsage(t *testing.T) {
	fake := daemontest.New()
	fake.Add(context.Background(), daemon.AddRequest{Members: []string{"/dev/a", "/dev/b"}, Level: "1"})
	sock := daemontest.Serve(t, fake)
	before := fake.Requests.Load()
	_, stderr, code := runCLI(withSocket(sock, []string{"replace", "-n", "0", "/dev/a", "--with", ""})...)
	if code != exitUsage || fake.Requests.Load() != before {
		t.Fatalf("replace --with \"\": exit %d, %d request(s) to the daemon, stderr %q; want exit 2 and none",
			code, fake.Requests.Load()-before, strings.TrimSpace(stderr))
	}
}

// A negative --poll is bad usage for run and passthrough as it is for
// serve: exit 2, before the driver is looked for.
func TestRunPassthroughNegativePollIsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--poll", "-1s"},
		{"run", "-l", "1", "--poll", "-1s", "/dev/a", "/dev/b"},
		{"passthrough", "--poll", "-1s", "/dev/a"},
		{"recover", "-n", "0", "--poll", "-1s", "/dev/a"},
	} {
		_, stderr, code := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, "--poll") {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming --poll", args, code, strings.TrimSpace(stderr))
		}
	}
}

// Flags that describe a new array (bitmap, assume-clean) do not fit an
// assembly (no --level) nor, for the bitmap, raid0: refused as bad usage
// (as `add -n N --spare` refuses them, and raid0 refuses --spare and
// --write-mostly), not dropped unsaid.
func TestAddFlagsThatDoNotFitAreUsage(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	for _, args := range [][]string{
		{"add", "--level", "0", "--bitmap-region", "1M", "/dev/a", "/dev/b"},
		{"add", "--assume-clean", "/dev/a", "/dev/b"},
		{"add", "--bitmap-region", "1M", "/dev/a", "/dev/b"},
		{"add", "--no-bitmap", "/dev/a", "/dev/b"},
	} {
		before := fake.Requests.Load()
		_, stderr, code := runCLI(withSocket(sock, args)...)
		if code != exitUsage || fake.Requests.Load() != before {
			t.Errorf("%q: exit %d, %d request(s) to the daemon, stderr %q; want exit 2, none",
				args, code, fake.Requests.Load()-before, strings.TrimSpace(stderr))
		}
	}
}

// An empty MEMBER is bad usage for every command that takes one.
func TestEmptyMemberIsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"examine", ""},
		{"passthrough", ""},
		{"recover", "-n", "0", ""},
	} {
		_, stderr, code := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, "MEMBER is empty") {
			t.Errorf("%q: exit %d, stderr %q; want exit 2, MEMBER is empty", args, code, strings.TrimSpace(stderr))
		}
	}
}
