package array

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// A sync job's operation that hits the member timeout fails the member (when
// another copy is left): the job's later reads of it fail at once. It
// used to count as a read error retried unit by unit (4 KiB), each retry
// on the hung member again waiting out the whole timeout (30 s by
// default: hours per 1 MiB step, with user writes to the range waiting on
// the barrier). Found by TestArrayModel.
func TestSyncReadTimeoutFailsMember(t *testing.T) {
	rack := memdev.NewRack(rand.New(rand.NewPCG(1, 1)))
	paths := []string{"/h0", "/h1"}
	for _, p := range paths {
		rack.AddDisk(p, 4<<20)
	}
	open := func(p string) (Device, error) {
		d, err := rack.Open(p)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	spec := CreateSpec{Level: engine.Level1, NoBitmap: true, SyncMinBytes: 1 << 40, OpenDevice: open}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil { // then a crash: a full resync pending
		t.Fatal(err)
	}
	a.Close()
	hung := rack.Disk("/h0")
	var mu sync.Mutex
	calls := 0
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		if d.Props().Path == "/h0" {
			mu.Lock()
			calls++
			if calls == 8 {
				rack.Release(hung) // bounded on the code that retries it
			}
			mu.Unlock()
		}
		return deviceRW(d, p, off, write)
	}
	t.Cleanup(func() { memberRW = deviceRW })
	spec.Level = -1
	if a, err = Open(paths, spec, false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 20 * time.Millisecond
	rack.Hang(hung)
	a.StartBackground()
	a.WaitSync()
	rack.Release(hung)
	mu.Lock()
	n := calls
	mu.Unlock()
	if n > 2 {
		t.Errorf("the resync sent %d operations to the member that hung; want it failed after the first timed out", n)
	}
	if st := a.Engine.State().Members[0].State; st != engine.MemberFaulty {
		t.Errorf("the hung member is %s, want faulty", st)
	}
}
