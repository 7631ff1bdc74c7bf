package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A foreground run told to end whose device the kernel refuses to stop
// exits at once with one line (status 1) saying how to serve it again,
// and leaves the array dirty: the device is served until the process
// exits, so a clean mark written meanwhile could be followed by writes
// it does not cover. (It used to wait for the queues for good; with that
// fixed, it then marked the array clean under the still served device.)
func TestRunRefusedStopLeavesArrayDirty(t *testing.T) {
	paths := mirrorFiles(t, 16<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.SetClean(false); err != nil { // as while written
		t.Fatal(err)
	}
	var before [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, b)
	}
	d := &ublk.Device{}
	d.SetStopFault(unix.EPERM)
	sig := make(chan os.Signal, 1)
	sig <- syscall.SIGTERM
	ch := make(chan error, 1)
	go func() { ch <- serveUntilEnd(d, a, sig, zap.NewNop()) }()
	select {
	case err = <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("run hangs on a stop the kernel refused")
	}
	if !errors.Is(err, ublk.ErrNotStopped) || exitCode(err) != exitError {
		t.Fatalf("run, its device's stop refused: %v (exit %d); want ErrNotStopped, exit %d", err, exitCode(err), exitError)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "--recover") {
		t.Errorf("run's answer %q: want one line naming run --recover", msg)
	}
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, before[i]) {
			t.Errorf("%s changed: the array was marked clean under its still served device", p)
		}
	}
}
