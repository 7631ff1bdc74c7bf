package array

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// Found by review: memberIO's contract is that "a hung member must not hang
// the job, and with it StopSync, del and replace": an operation that does
// not return within the member timeout fails the member, and later
// operations to a faulty role return at once. A member kept because it
// holds the last copy of some data (a raid10 f2 with a neighbour out: md
// never fails it) is not failed, though, and a raid1/10 check that meets
// its read timing out narrows the read to 4 KiB units (checkRange ->
// readUnits), each of which waits out the whole member timeout again,
// then rewrites and reads back (one more). The parity jobs stop at the
// first timeout (Job.Unrepairable); the copies' check does not, and
// readUnits does not look at the job's context: a `del` (StopSync) issued
// after the first timeout waits for every unit of the step, each a
// member timeout long (with a 512 KiB chunk and the 30 s default: over an
// hour), with the step's range raised against user writes all along, and
// one bounce buffer left behind per given-up read.
func TestReviewScrubCheckHungKeptMemberHoldsStop(t *testing.T) {
	paths := memberFiles(t, 4, 8<<20)
	setRW := hookRW(t) // (before Open: its repair worker takes memberRW)
	a, err := Open(paths, CreateSpec{Level: engine.Level10, Layout: engine.LayoutF2, ChunkSectors: 128,
		AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Member 3 out: member 0 now holds the only copy of the chunks it
	// shares with 3, and is never failed; its chunks shared with member 1
	// still have two copies and are checked.
	if err := a.Fail(3); err != nil {
		t.Fatal(err)
	}
	a.MemberTimeout = 50 * time.Millisecond
	dev0 := a.Members[0].Device
	release := make(chan struct{})
	var hung atomic.Int64
	setRW(func(d Device, p []byte, off int64, write bool) error {
		if d == dev0 && p != nil && !write {
			hung.Add(1)
			<-release // member 0 stops answering reads
		}
		return deviceRW(d, p, off, write)
	})
	var once sync.Once
	rel := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { rel(); memberRW = deviceRW })
	a.sync.s = resync.New(a.Engine, a.xbar, newMemberIO(a), resync.Config{})
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the check's first read of member 0 to hang", func() bool { return hung.Load() >= 1 })
	// The operator deletes the array (del: StopSync) while member 0 hangs.
	a.StopSync()
	n := hung.Load()
	rel()
	if st := a.Engine.State().Members[0].State; st != engine.MemberActive {
		t.Fatalf("member 0 is %v: it holds the last copy of some chunks and must stay", st)
	}
	t.Logf("reads of member 0 given up before StopSync returned: %d; last check %q", n, a.SyncStatus().LastCheckResult)
	if n > 2 {
		t.Errorf("StopSync (del) returned only after the check had issued %d reads to the hung member, each waited out for the whole member timeout while the range stayed raised: a hung member hung the job and its stop", n)
	}
}
