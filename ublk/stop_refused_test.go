package ublk

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// servedDevice is a Device as Create leaves it, on a fake control: the
// character device open and its queues serving until done is closed
// (by the test, standing for the kernel's aborting their FETCHes).
func servedDevice(t *testing.T, answers map[uint32]unix.Errno) *Device {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	info := DevInfo{DevID: 7, NrHwQueues: 1, QueueDepth: 64, State: StateLive, Flags: flagsRequiredByThisDaemon | FlagSafeStopDev}
	return &Device{ctrl: fakeControlAnswering(t, info, Params{}, answers), info: info, char: f, done: make(chan struct{})}
}

// within runs f and fails the test if it has not returned in 20 seconds:
// a hang, not a slow answer.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s hangs", what)
		return nil
	}
}

func (d *Device) charOpen() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.char != nil
}

// A STOP_DEV the kernel refuses (here EPERM, as the control path answers
// a caller without CAP_SYS_ADMIN; the driver's stop itself cannot fail)
// aborts no FETCH: Stop returns the refusal at once, the device goes on
// serving and is not marked stopped, and a later Stop stops it.
func TestStopRefusedLeavesDeviceServing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     uint32
		unused bool
	}{{"Stop", cmdStopDev, false}, {"StopUnused", cmdTryStopDev, true}} {
		t.Run(tc.name, func(t *testing.T) {
			answers := map[uint32]unix.Errno{tc.op: unix.EPERM}
			d := servedDevice(t, answers)
			stop := d.Stop
			if tc.unused {
				stop = d.StopUnused
			}
			err := within(t, tc.name, stop)
			if !errors.Is(err, ErrNotStopped) || !errors.Is(err, unix.EPERM) {
				t.Fatalf("%s refused by the kernel: %v, want ErrNotStopped wrapping EPERM", tc.name, err)
			}
			if !d.charOpen() {
				t.Fatal("the character device was released: the device is no longer served")
			}
			select {
			case <-d.Done():
				t.Fatal("Done closed: the queues were not stopped")
			default:
			}
			answers[tc.op] = 0
			close(d.done) // the kernel's stop aborts the queues' FETCHes
			if err := within(t, "the second "+tc.name, stop); err != nil {
				t.Fatalf("a later %s, which the kernel does: %v", tc.name, err)
			}
			if d.charOpen() {
				t.Fatal("stopped, but the character device is still open")
			}
		})
	}
}

// Delete does not try DEL_DEV (which would wait for the character device
// this process holds) after a refused stop: the fake fails the test on
// an unexpected DEL_DEV.
func TestDeleteAfterRefusedStop(t *testing.T) {
	d := servedDevice(t, map[uint32]unix.Errno{cmdStopDev: unix.EINVAL})
	if err := within(t, "Delete", d.Delete); !errors.Is(err, ErrNotStopped) {
		t.Fatalf("Delete, its stop refused: %v, want ErrNotStopped", err)
	}
	if !d.charOpen() {
		t.Fatal("the character device was released")
	}
}

// ENODEV says the device is gone (deleted, or its block device already
// removed): its FETCHes were aborted, and Stop ends as for a stop.
func TestStopOfGoneDeviceFinishes(t *testing.T) {
	d := servedDevice(t, map[uint32]unix.Errno{cmdStopDev: unix.ENODEV})
	close(d.done) // aborted with the device
	if err := within(t, "Stop", d.Stop); !errors.Is(err, unix.ENODEV) || errors.Is(err, ErrNotStopped) {
		t.Fatalf("Stop of a gone device: %v, want ENODEV, not ErrNotStopped", err)
	}
	if d.charOpen() {
		t.Fatal("the character device is still open")
	}
	if err := d.Stop(); err != nil {
		t.Fatalf("Stop again: %v (stopped already)", err)
	}
}

// teardown (Create's failure path) gives the device up: where STOP_DEV
// is refused, it makes the queues leave (letGo) instead of waiting for
// aborts that never come.
func TestTeardownRefusedStop(t *testing.T) {
	d := servedDevice(t, map[uint32]unix.Errno{cmdStopDev: unix.EPERM})
	quit := make(chan struct{})
	defer close(quit)
	go func() { // the queues: they leave once told to detach
		for !d.detach.Load() {
			select {
			case <-quit:
				return
			case <-time.After(time.Millisecond):
			}
		}
		close(d.done)
	}()
	within(t, "teardown", func() error { d.teardown(); return nil })
	if d.charOpen() {
		t.Fatal("the character device is still open")
	}
}
