package ublk

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// Found by review (recovery, bounds): GET_QUEUE_AFFINITY answers the CPUs blk-mq
// maps to the queue, over every possible CPU: a queue of a device with
// more queues than the CPUs this process may use (CPUs taken offline
// since the device was made, a cpuset that confines the daemon) is mapped
// to CPUs the queue thread cannot run on. With --cpus own, queueAffinity
// pins the thread to the first of them unchecked; sched_setaffinity then
// fails, runQueue's setup fails ("pin to CPUs"), and Create or Recover
// fails: a recovery abandoned that way stops the device on 6.12
// (abandonRecovery), failing the I/O its users were waiting with. The
// default policy (others) already keeps to the CPUs the process may use;
// own does not.
func TestQueueAffinityOwnStaysWithinAllowedCPUs(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	c := 0
	for allowed.IsSet(c) {
		c++
	}
	var set unix.CPUSet // the queue's CPUs: only one this process may not use
	set.Set(c)
	got := queueAffinity(CPUsOwn, &set)
	if got == nil {
		return // not pinned: fine
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // (the thread ends with the goroutine)
		errc <- unix.SchedSetaffinity(0, got)
	}()
	if err := <-errc; err != nil {
		t.Fatalf("queue mapped to CPU %d (the process may use %d CPUs, not that one): own pins the queue thread to %v, which fails: %v; the queue's setup, and Create/Recover, fail",
			c, allowed.Count(), *got, err)
	}
}
