package ublk

import (
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type hungHandler struct{ completions int }

func (*hungHandler) Handle(*Request)              {}
func (h *hungHandler) OnCompletion(uint64, int32) { h.completions++ }
func (*hungHandler) Close()                       {}

// hungQueue is a one-tag queue over a fresh ring with one member read in
// flight that does not complete until something is written to the pipe
// it returns (a hung member, for as long as nothing is).
func hungQueue(t *testing.T, live int, detach *atomic.Bool) (*Queue, *hungHandler, *Ring, int) {
	t.Helper()
	r := newTestRing(t, 8, RingOptions{})
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	wakeMem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	h := &hungHandler{}
	state := []uint8{tagFetched}
	if live == 0 {
		state[0] = tagDead
	}
	q := &Queue{id: 0, depth: 1, ring: r, state: state, live: live, handler: h,
		wake: os.NewFile(uintptr(efd), "wake"), wakeMem: wakeMem, wakeBuf: wakeMem[:8:8], detach: detach}
	if live > 0 {
		q.armWake()
	}
	// The read's buffer is off the Go heap: the kernel writes it whenever
	// the read completes, after this function has returned.
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(buf) })
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	s, err := q.SQE(1)
	if err != nil {
		t.Fatal(err)
	}
	PrepRW(s, OpRead, int32(p[0]), buf[:8], ^uint64(0), s.UserData)
	s.Flags = 0
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	return q, h, r, p[1]
}

// runLoop runs q's loop on a locked thread; the channel closes when it ends.
func runLoop(q *Queue) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		q.loop()
		close(done)
	}()
	return done
}

// Device.Detach (and a failed queue's hand-over) promise that a queue
// leaves within detachDrain even if a member never answers, with a handler
// that is not a Ticker (Passthrough) too: nothing else wakes the loop.
func TestDetachDrainBoundedWithoutTicker(t *testing.T) {
	var detach atomic.Bool
	q, _, _, _ := hungQueue(t, 1, &detach)
	done := runLoop(q)
	time.Sleep(100 * time.Millisecond)
	detach.Store(true) // Device.letGo
	q.Wake()
	select {
	case <-done:
		t.Logf("loop left with %d member op(s) in flight", q.inflight)
	case <-time.After(detachDrain + 3*time.Second):
		t.Fatalf("detaching queue still in its loop %v after Detach (detachDrain %v): Detach/letGo and Device.Done wait for good", detachDrain+3*time.Second, detachDrain)
	}
}

// A stopped queue (every fetch ended: live 0) with an operation given up
// on a hung member still out leaves within detachDrain: Device.Stop, and
// del of the array, end.
func TestStoppedQueueLeavesHungMemberIO(t *testing.T) {
	var detach atomic.Bool
	q, _, _, _ := hungQueue(t, 0, &detach)
	select {
	case <-runLoop(q):
		t.Logf("loop left with %d member op(s) in flight", q.inflight)
	case <-time.After(detachDrain + 3*time.Second):
		t.Fatalf("stopped queue still in its loop %v later, waiting for a hung member (detachDrain %v)", detachDrain+3*time.Second, detachDrain)
	}
}

// io_uring_enter(GETEVENTS) answers EBADR once after the kernel dropped a
// CQE (no memory for an overflow entry) and clears the condition: the
// ring goes on working. The queue fails, and still reaps the member I/O
// in flight before it leaves: left out, it would land after the hand-over
// (a late write over the next server's newer data on the copy path).
func TestDroppedCompletionsStillDrainMemberIO(t *testing.T) {
	var detach atomic.Bool
	q, h, r, answer := hungQueue(t, 1, &detach)
	// The kernel reports a dropped CQE once (IO_CHECK_CQ_DROPPED_BIT is
	// cleared when reported).
	real := r.sysEnter
	reported := false
	r.sysEnter = func(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, unix.Errno) {
		if !reported && flags&enterGetEvents != 0 {
			reported = true
			return 0, unix.EBADR
		}
		return real(fd, toSubmit, minComplete, flags, arg, argSize)
	}
	// The member answers 100 ms later.
	go func() { time.Sleep(100 * time.Millisecond); unix.Write(answer, []byte("x")) }()
	select {
	case <-runLoop(q):
	case <-time.After(5 * time.Second):
		t.Fatal("loop did not end")
	}
	t.Logf("queue error: %v", q.err)
	if q.inflight != 0 || h.completions != 1 {
		t.Fatalf("queue left on EBADR with %d member op(s) in flight (reaped %d), though the ring still works: no drain before the hand-over", q.inflight, h.completions)
	}
}
