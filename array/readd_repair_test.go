package array

import (
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A read repair's rewrite of role 0 hangs on its device; role 0 is failed
// and the same device re-added. The repair's timeout is from before the
// failure: it must not fail the re-added member (failHolding compares
// *Member, which a re-add reuses).
func TestRepairTimeoutAfterReAddKeepsMember(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	var (
		mu      sync.Mutex
		dev0    Device
		once    sync.Once
		hung    = make(chan struct{})
		release = make(chan struct{})
	)
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		mu.Lock()
		hit := write && p != nil && dev0 != nil && d == dev0
		mu.Unlock()
		if hit {
			first := false
			once.Do(func() { first = true; close(hung) })
			if first {
				<-release
			}
		}
		return deviceRW(d, p, off, write)
	}
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var relOnce sync.Once
	rel := func() { relOnce.Do(func() { close(release) }) }
	defer rel()
	a.MemberTimeout = time.Second
	a.mu.Lock()
	mu.Lock()
	dev0 = a.Members[0].Device
	mu.Unlock()
	a.mu.Unlock()
	a.requestRepair(2048, 8, 1<<0)
	select {
	case <-hung:
	case <-time.After(10 * time.Second):
		t.Fatal("the repair did not write role 0")
	}
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	if err := a.ReAdd(paths[0]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // past the repair's timeout
	if s := a.Engine.State().Members[0]; s.State == engine.MemberFaulty {
		t.Fatalf("a repair timeout from before the failure failed the re-added role 0: %+v", s)
	}
	rel()
	a.WaitSync()
	if s := a.Engine.State().Members[0]; s.State != engine.MemberActive {
		t.Fatalf("role 0 after the rebuild: %+v", s)
	}
}
