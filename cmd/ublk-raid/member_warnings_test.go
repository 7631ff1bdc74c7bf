package main

import (
	"context"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// stateWarnBackend answers every member operation that changes the state
// file's member lists as the daemon does when that file's write failed:
// done, with a warning.
type stateWarnBackend struct{ *daemontest.Backend }

const stateWarning = "/dev/ublkb0 changed, but the state file was not written (no space left on device)"

func warned(a daemon.Array, err error) (daemon.Array, error) {
	a.Warnings = append(a.Warnings, stateWarning)
	return a, err
}

func (b stateWarnBackend) Remove(n int, m string) (daemon.Array, error) {
	return warned(b.Backend.Remove(n, m))
}

// (The fake does not implement these: the array as it is.)
func (b stateWarnBackend) ReAdd(n int, _ string) (daemon.Array, error) {
	return warned(b.Detail(n))
}
func (b stateWarnBackend) AddSpare(n int, _ []string, _ bool) (daemon.Array, error) {
	return warned(b.Detail(n))
}
func (b stateWarnBackend) Replace(n int, _, _ string, _ bool) (daemon.Array, error) {
	return warned(b.Detail(n))
}

// Contract: the warnings of a member operation's answer (the daemon's
// state file not written: the operation was done, a restarted daemon
// would not see it) are printed on stderr, as add's are; the operation's
// line stays on stdout and the exit status 0 (it was done).
func TestMemberOpWarningsPrinted(t *testing.T) {
	b := stateWarnBackend{daemontest.New()}
	sock := daemontest.Serve(t, b)
	if _, err := b.Add(context.Background(), daemon.AddRequest{Members: []string{"/dev/vdc", "/dev/vdd"}, Level: "1"}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"add", "-n", "0", "--spare", "/dev/vde"},
		{"replace", "-n", "0", "1", "--with", "/dev/vde"},
		{"fail", "-n", "0", "1"},
		{"remove", "-n", "0", "1"},
		{"re-add", "-n", "0", "/dev/vdd"},
	} {
		stdout, stderr, code := runCLI(withSocket(sock, args)...)
		if code != 0 || stdout == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
			continue
		}
		want := args[0] != "fail" // fail changes no member list
		if got := strings.Contains(stderr, "ublk-raid: warning: "+stateWarning); got != want {
			t.Errorf("%v: stderr %q; warning printed %v, want %v", args, stderr, got, want)
		}
	}
}
