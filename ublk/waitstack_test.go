package ublk

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

//go:noinline
func onDeeperStack(n int, f func() (time.Duration, error)) (time.Duration, error) {
	if n == 0 {
		return f()
	}
	d, err := onDeeperStack(n-1, f)
	return d, err
}

// WaitTimeout hands the kernel the address of its timespec. That
// timespec must not move while the kernel may read it: a goroutine's
// stack moves when it grows, and a wait interrupted by a signal (EINTR,
// retried) must wait for what is left, not what the timespec held
// before the stack moved (nor whatever the freed stack holds by then).
// The sweep over stack depths makes the stack grow inside WaitTimeout,
// after the timespec's address was taken, at one depth or another.
func TestRingWaitTimeoutStackMoves(t *testing.T) {
	r := newTestRing(t, 4, RingOptions{})
	const wait, signalAt = 40 * time.Millisecond, 25 * time.Millisecond
	try := func(depth int) (time.Duration, error) {
		type result struct {
			d   time.Duration
			err error
		}
		ch := make(chan result)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			pid, tid := unix.Getpid(), unix.Gettid()
			timer := time.AfterFunc(signalAt, func() { unix.Tgkill(pid, tid, unix.SIGURG) })
			defer timer.Stop()
			d, err := onDeeperStack(depth, func() (time.Duration, error) {
				start := time.Now()
				err := r.WaitTimeout(wait)
				return time.Since(start), err
			})
			ch <- result{d, err}
		}()
		res := <-ch
		return res.d, res.err
	}
	for depth := range 96 {
		d, err := try(depth)
		if err == unix.ETIME && d < wait+12*time.Millisecond {
			continue
		}
		// Confirm (a loaded machine can be late once).
		bad := 0
		for range 3 {
			if d2, err2 := try(depth); err2 != unix.ETIME || d2 >= wait+12*time.Millisecond {
				bad++
				d, err = d2, err2
			}
		}
		if bad == 3 {
			t.Fatalf("stack depth %d: WaitTimeout(%v) interrupted at %v took %v, err %v", depth, wait, signalAt, d, err)
		}
	}
}
