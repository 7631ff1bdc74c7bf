package daemon

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// refusingStop serves a dirty raid1 (as while written) at n on a device
// whose stop the kernel refuses with EPERM (as its control path answers
// a caller it does not let stop it; the driver's stop itself cannot
// fail), saved in the state file. It returns the member files and the
// state file's path.
func refusingStop(t *testing.T, n int) (*Manager, *served, []string, string) {
	t.Helper()
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	d := &ublk.Device{}
	d.SetStopFault(unix.EPERM)
	s := &served{n: n, a: a, d: d, entry: StateEntry{Number: n, UUID: a.Status().UUID, Members: paths}}
	m.arrays[n] = s
	if err := m.saveState(); err != nil {
		t.Fatal(err)
	}
	return m, s, paths, state
}

// A del whose stop the kernel refuses changes nothing, as any refused
// command: it answers at once, with one line and an error status (exit
// 1, not the usage error's 2), and the array stays served, its members'
// bytes and the state file as they were. (It used to wait for the
// queues for good; with that fixed, it then marked the array clean,
// closed it and dropped it from the state file while the device went on
// serving it.)
func TestDeleteRefusedStopKeepsArrayServed(t *testing.T) {
	const n = 1000 // no /dev/ublkb1000: not in use
	m, s, paths, state := refusingStop(t, n)
	before := hashes(t, append(paths, state)...)
	ch := make(chan error, 1)
	go func() { _, err := m.Delete(n); ch <- err }()
	var err error
	select {
	case err = <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("del hangs on a stop the kernel refused")
	}
	if err == nil || !errors.Is(err, ublk.ErrNotStopped) || !errors.Is(err, unix.EPERM) {
		t.Fatalf("del, its stop refused: %v; want the refusal (ErrNotStopped, EPERM)", err)
	}
	if code := statusOf(err); code == http.StatusBadRequest || code == http.StatusOK {
		t.Errorf("del, its stop refused: status %d; want an error status other than usage's", code)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, DevicePath(n)) {
		t.Errorf("del's answer %q: want one line naming %s", msg, DevicePath(n))
	}
	m.mu.Lock()
	still := m.arrays[n] == s
	m.mu.Unlock()
	if !still {
		t.Error("the array is no longer served")
	}
	sameHashes(t, "a del whose stop was refused", before, hashes(t, append(paths, state)...))
}

// A shutdown whose stop the kernel refuses leaves that device as it
// leaves one in use: to the next daemon to recover, its array neither
// marked clean nor closed under it, and in the state file.
func TestShutdownRefusedStopLeavesDevice(t *testing.T) {
	m, _, paths, state := refusingStop(t, 1000)
	before := hashes(t, append(paths, state)...)
	ch := make(chan struct{})
	go func() { m.Shutdown(false); close(ch) }()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown hangs on a stop the kernel refused")
	}
	sameHashes(t, "a shutdown whose stop was refused", before, hashes(t, append(paths, state)...))
}
