package ublk

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A queue ring made for polling (PollFor > 0, so TaskrunFlag) with
// DEFER_TASKRUN (the daemon's default): completions wait as task work
// until the thread enters the kernel, so the polling loop (Queue.poll)
// only learns of them through the ring's TASKRUN flag. Without the flag
// it spins its whole PollFor every turn, seeing nothing.
func TestRingDeferTaskrunFlagsPendingWork(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := newTestRing(t, 8, RingOptions{SingleIssuer: true, DeferTaskrun: true, TaskrunFlag: true, CQEntries: 16})
	if r.Flags()&setupDeferTaskrun == 0 {
		t.Skip("no DEFER_TASKRUN on this host")
	}
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	buf := make([]byte, 8)
	s := r.GetSQE()
	PrepRW(s, OpRead, int32(p[0]), buf, ^uint64(0), 7)
	s.Flags = 0 // a plain descriptor
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	// The read waits for data; another thread supplies it.
	go func() {
		time.Sleep(10 * time.Millisecond)
		unix.Write(p[1], []byte("x"))
	}()
	deadline := time.Now().Add(2 * time.Second)
	for r.CQReady() == 0 && !r.TaskworkPending() {
		if time.Now().After(deadline) {
			t.Fatalf("ring flags %#x: the read's completion is pending but a polling thread cannot see it", r.Flags())
		}
	}
	if err := r.Poll(); err != nil {
		t.Fatal(err)
	}
	if c := r.PeekCQE(); c == nil || c.UserData != 7 || c.Res != 1 {
		t.Fatalf("after Poll: cqe %+v", c)
	}
	r.SeenCQE()
	// Once run, the work is no longer flagged: an idle queue must not
	// spin in Poll.
	if r.TaskworkPending() {
		t.Fatal("task work still flagged after Poll ran it")
	}
}
