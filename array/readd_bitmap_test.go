package array

import (
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A bitmap batch hangs on role 0's device; role 0 is failed (in memory)
// and the same device re-added. The batch's timeout is from before the
// failure: it must not fail the re-added member (flusher.commit compares
// roleDevices, not *Member).
func TestBitmapTimeoutAfterReAddKeepsMember(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
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
	a.Engine.FailRedundant(0)
	if err := a.ReAdd(paths[0]); err != nil {
		t.Fatalf("re-add: %v", err)
	}
	a.Bitmap.EndWrite(first, last)
	if s := a.Engine.State().Members[0]; s.State == engine.MemberFaulty {
		t.Fatalf("a bitmap timeout from before the failure failed the re-added role 0: %+v", s)
	}
	rel() // the late write returns: the rebuild may write the device
	a.WaitSync()
	if s := a.Engine.State().Members[0]; s.State != engine.MemberActive {
		t.Fatalf("role 0 after the rebuild: %+v", s)
	}
}
