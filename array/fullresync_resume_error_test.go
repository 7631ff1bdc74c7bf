package array

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// A full resync resumed from its recorded position (ResyncOffset X) that
// loses a redundant member after its first step restarts (nextJob) from
// X, not from 0: the steps it did before its first flush say nothing
// about the range below X, which the earlier run synced and flushed.
func TestResumedFullResyncKeepsPositionOnMemberError(t *testing.T) {
	paths := crashNoBitmap(t, 3, 32<<20)
	g := &armGate{}
	memberRW = g.rw
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	g.arm(8) // 4 steps (2 copies written each), the 5th held
	a.StartBackground()
	<-g.reached
	stopJob(a)
	close(g.hold)
	a.StopSync()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	memberRW = deviceRW
	x := superblockOf(t, paths[0]).ResyncOffset
	if x < 4*2048 {
		t.Fatalf("recorded resync offset %d", x)
	}

	var bad atomic.Pointer[Device]
	var writes atomic.Int32
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		// The resumed job's first step writes roles 1 and 2; the second
		// step's write to role 2 fails.
		if write && p != nil && writes.Add(1) > 2 && bad.Load() != nil && d == *bad.Load() {
			return errors.New("injected write error")
		}
		return deviceRW(d, p, off, write)
	}
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dev := b.Members[2].Device
	bad.Store(&dev)
	var mu sync.Mutex
	var starts []uint64
	b.SetSyncLog(func(msg string, r SyncReport, err error) {
		t.Logf("%s %s pos=%d err=%v", msg, r.Kind, r.Position, err)
		if msg == "sync started" {
			mu.Lock()
			starts = append(starts, r.Position)
			mu.Unlock()
		}
	})
	if err := b.SetClean(false); err != nil {
		t.Fatal(err)
	}
	b.StartBackground()
	b.WaitSync()
	waitIdle(t, b)
	mu.Lock()
	defer mu.Unlock()
	if len(starts) < 2 || starts[0] != x {
		t.Fatalf("starts %v, want %d then a restart", starts, x)
	}
	if starts[1] < x {
		t.Errorf("the resync restarted after the member error at %d, below the recorded position %d that the earlier run had synced and flushed", starts[1], x)
	}
}
