package array

import (
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A read repair's rewrite of role 0 hangs on its device (a sick member:
// the repair was asked because it failed a read), and role 0 gets a device
// meanwhile: a replacement, or the same device failed and re-added. The
// repair's timeout is the old device's, or the device's from before its
// failure: it must not fail the member being rebuilt in the role
// (memberIO.do fails the role only while it holds the roleDevice the
// operation went to).
func TestRepairTimeoutAfterReplaceKeepsNewMember(t *testing.T) {
	for _, how := range []string{"replace", "re-add"} {
		t.Run(how, func(t *testing.T) { repairTimeoutAfter(t, how) })
	}
}

func repairTimeoutAfter(t *testing.T, how string) {
	// Small: the rebuild should end before the repair is given up (a
	// second); one still running then waits for the late write, which
	// this test holds for two, and fails the role (seen under a loaded
	// go test ./...).
	paths := memberFiles(t, 3, 6<<20)
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
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
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
	if how == "replace" {
		err = a.ReplaceMember(0, paths[2], false)
	} else if err = a.Fail(0); err == nil {
		err = a.ReAdd(paths[0])
	}
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // past the repair's timeout
	if s := a.Engine.State().Members[0]; s.State == engine.MemberFaulty {
		t.Fatalf("a repair timeout from before the %s failed the member now in role 0: %+v", how, s)
	}
	rel() // the late write returns: a rebuild may write the device
	a.WaitSync()
	if s := a.Engine.State().Members[0]; s.State != engine.MemberActive {
		t.Fatalf("role 0 after the rebuild: %+v", s)
	}
}

// A bitmap batch is out on role 0's device, which hangs; role 0 is failed
// in memory only (a queue's read timeout does not persist, so nothing
// waited for the flusher) and gets a device: a replacement, or the same
// device re-added. The batch's timeout is the old device's, or the
// device's from before its failure: it must not fail the member now in
// the role (flusher.commit compares roleDevices, not devices).
func TestBitmapTimeoutAfterReplaceKeepsNewMember(t *testing.T) {
	for _, how := range []string{"replace", "re-add"} {
		t.Run(how, func(t *testing.T) { bitmapTimeoutAfter(t, how) })
	}
}

func bitmapTimeoutAfter(t *testing.T, how string) {
	paths := memberFiles(t, 3, 32<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = time.Second
	hung, release := make(chan struct{}), make(chan struct{})
	var relOnce sync.Once
	rel := func() { relOnce.Do(func() { close(release) }) }
	defer rel()
	var once sync.Once
	old := writeBitmapBlock
	t.Cleanup(func() { writeBitmapBlock = old })
	writeBitmapBlock = func(m *Member, data []byte, off int64) error {
		if m.Path == paths[0] {
			first := false
			once.Do(func() { first = true })
			if first {
				close(hung)
				<-release
			}
		}
		return old(m, data, off)
	}
	first, last := a.Bitmap.Regions(0, 8)
	if a.Bitmap.StartWrite(first, last, 0) {
		t.Fatal("a write to a clean region did not wait")
	}
	<-hung
	a.Engine.FailRedundant(0) // a queue's read timeout on the same device
	if how == "replace" {
		err = a.Replace(0, paths[2])
	} else {
		err = a.ReAdd(paths[0])
	}
	if err != nil {
		t.Logf("%s: %v", how, err)
	}
	a.Bitmap.EndWrite(first, last)
	if s := a.Engine.State().Members[0]; s.State == engine.MemberFaulty {
		a.mu.Lock()
		p := a.Members[0].Path
		a.mu.Unlock()
		t.Fatalf("a bitmap timeout from before the %s failed the member %s now in role 0: %+v", how, p, s)
	}
	rel() // the late write returns: a rebuild may write the device
	a.WaitSync()
	if s := a.Engine.State().Members[0]; s.State != engine.MemberActive {
		t.Fatalf("role 0 after the rebuild: %+v", s)
	}
}
