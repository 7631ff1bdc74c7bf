package ublk

import (
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A submission the kernel cannot take for now (EAGAIN: no memory for a
// request; EBUSY: completion backlog) with nothing to reap is retried: an
// error would end the queue loop and fail every request of the device.
func TestRingRetriesTransientBusy(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EAGAIN, unix.EBUSY} {
		runtime.LockOSThread()
		r := newTestRing(t, 8, RingOptions{})
		refusals := 0
		real := r.sysEnter
		r.sysEnter = func(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, unix.Errno) {
			if toSubmit > 0 && refusals < 3 {
				refusals++
				return 0, errno
			}
			return real(fd, toSubmit, minComplete, flags, arg, argSize)
		}
		s, err := r.NextSQE()
		if err != nil {
			t.Fatal(err)
		}
		PrepNop(s, 7)
		if _, err := r.SubmitAndWait(1); err != nil {
			t.Fatalf("%v: SubmitAndWait: %v", errno, err)
		}
		if c := r.PeekCQE(); c == nil || c.UserData != 7 {
			t.Fatalf("%v: no completion after the retries", errno)
		}
		r.SeenCQE()

		refusals = 0
		s, _ = r.NextSQE()
		PrepNop(s, 8)
		if err := r.WaitTimeout(time.Second); err != nil {
			t.Fatalf("%v: WaitTimeout: %v", errno, err)
		}
		if c := r.PeekCQE(); c == nil || c.UserData != 8 {
			t.Fatalf("%v: WaitTimeout: no completion after the retries", errno)
		}
		r.SeenCQE()
		if refusals != 3 {
			t.Fatalf("%v: %d refusals injected, want 3", errno, refusals)
		}
		runtime.UnlockOSThread()
	}
}

// A refusal that does not pass (the kernel answering EAGAIN or EBUSY on
// every try, nothing to reap) is an error after busyGiveUp, not a retry
// loop for good: the queue thread would hang in it, never noticing a
// detach or a stop, and the device's requests with it.
func TestRingGivesUpPersistentBusy(t *testing.T) {
	defer func(d time.Duration) { busyGiveUp = d }(busyGiveUp)
	busyGiveUp = 50 * time.Millisecond
	for _, errno := range []unix.Errno{unix.EAGAIN, unix.EBUSY} {
		runtime.LockOSThread()
		r := newTestRing(t, 8, RingOptions{})
		r.sysEnter = func(int, uint32, uint32, uint32, unsafe.Pointer, uintptr) (int, unix.Errno) { return 0, errno }
		s, err := r.NextSQE()
		if err != nil {
			t.Fatal(err)
		}
		PrepNop(s, 7)
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			_, err := r.SubmitAndWait(1)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, errno) {
				t.Fatalf("%v on every try: SubmitAndWait returned %v, want %v", errno, err, errno)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%v on every try: SubmitAndWait still retrying after 5s", errno)
		}
		runtime.UnlockOSThread()
	}
}

// NextSQE on a full SQ submits to make room; a refusal then (EAGAIN,
// EBUSY) with completions ready is retried, not returned as room made:
// its caller is handling completions and cannot reap more, so the SQ
// stayed full and a member operation failed with ErrRingFull (which
// failed the queue and handed the whole device over to a recovery).
func TestNextSQEWaitsOutRefusalWithCompletionsReady(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EAGAIN, unix.EBUSY} {
		runtime.LockOSThread()
		r := newTestRing(t, 8, RingOptions{})
		s, err := r.NextSQE()
		if err != nil {
			t.Fatal(err)
		}
		PrepNop(s, 1)
		if _, err := r.SubmitAndWait(1); err != nil {
			t.Fatal(err)
		}
		if r.CQReady() == 0 {
			t.Fatal("no completion ready")
		}
		for r.GetSQE() != nil { // fill the SQ (left unreaped: CQ ready)
		}
		refusals := 0
		real := r.sysEnter
		r.sysEnter = func(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, unix.Errno) {
			if toSubmit > 0 && refusals < 2 {
				refusals++
				return 0, errno
			}
			return real(fd, toSubmit, minComplete, flags, arg, argSize)
		}
		if _, err := r.NextSQE(); err != nil {
			t.Fatalf("%v: NextSQE on a full SQ with completions ready: %v", errno, err)
		}
		if refusals != 2 {
			t.Fatalf("%v: %d refusals injected, want 2", errno, refusals)
		}
		runtime.UnlockOSThread()
	}
}
