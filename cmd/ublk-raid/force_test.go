package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// forceBackend records what --force sent and refuses without it, as the
// daemon does for a device that holds data.
type forceBackend struct {
	*daemontest.Backend
	mu     sync.Mutex
	forces map[string]bool // by operation
}

func (b *forceBackend) record(op string, force bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forces[op] = force
	if !force {
		return daemon.Refused(errors.New("/dev/c carries ext4 filesystem (at byte 1080); --force overwrites it"))
	}
	return nil
}

// got is the force the daemon got for op, and whether op was asked.
func (b *forceBackend) got(op string) (force, asked bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	force, asked = b.forces[op]
	return force, asked
}

func (b *forceBackend) Add(ctx context.Context, req daemon.AddRequest) (daemon.Array, error) {
	if err := b.record("add", req.Force); err != nil {
		return daemon.Array{}, err
	}
	a, err := b.Backend.Add(ctx, req)
	a.Warnings = []string{"largest member /dev/c is 536870912 bytes; the array uses 268435456 bytes of each member, leaving 268435456 bytes (50%) of it unused"}
	return a, err
}

func (b *forceBackend) AddSpare(n int, _ []string, force bool) (daemon.Array, error) {
	if err := b.record("add-spare", force); err != nil {
		return daemon.Array{}, err
	}
	return b.Detail(n)
}

func (b *forceBackend) Replace(n int, _, _ string, force bool) (daemon.Array, error) {
	if err := b.record("replace", force); err != nil {
		return daemon.Array{}, err
	}
	return b.Detail(n)
}

// --force reaches the daemon on add, add -n N --spare and replace;
// without it the refusal is one line, exit 1. add's warnings go to
// stderr and stdout stays the device path.
func TestForceAndWarnings(t *testing.T) {
	b := &forceBackend{Backend: daemontest.New(), forces: map[string]bool{}}
	sock := daemontest.Serve(t, b)
	for _, tc := range []struct {
		op   string
		args []string
	}{
		{"add", []string{"add", "--level", "1", "/dev/c", "/dev/d"}},
		{"add-spare", []string{"add", "-n", "0", "--spare", "/dev/c"}},
		{"replace", []string{"replace", "-n", "0", "/dev/d", "--with", "/dev/c"}},
	} {
		_, stderr, code := runCLI(withSocket(sock, tc.args)...)
		if code != exitError || !strings.Contains(stderr, "--force overwrites it") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and one line", tc.args, code, stderr)
		}
		if f, ok := b.got(tc.op); !ok || f {
			t.Errorf("%v: the daemon got force=%v (asked: %v)", tc.args, f, ok)
		}
		stdout, stderr, code := runCLI(withSocket(sock, append(tc.args, "--force"))...)
		if f, _ := b.got(tc.op); code != 0 || !f {
			t.Errorf("%v --force: exit %d (%q), daemon got force=%v", tc.args, code, stderr, f)
		}
		if tc.op == "add" {
			if stdout != "/dev/ublkb0\n" || !strings.Contains(stderr, "ublk-raid: warning: largest member /dev/c") {
				t.Errorf("add --force: stdout %q, stderr %q", stdout, stderr)
			}
		}
	}
}
