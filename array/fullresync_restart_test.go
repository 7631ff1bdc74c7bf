package array

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// armGate holds the data write after the next `left` ones, when armed;
// unlike gateRW it can be armed again for a later job of the same array
// (an array's memberIO takes memberRW when it is opened).
type armGate struct {
	mu      sync.Mutex
	armed   bool
	left    int
	reached chan struct{}
	hold    chan struct{}
}

func (g *armGate) arm(left int) {
	g.mu.Lock()
	g.armed, g.left, g.reached, g.hold = true, left, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *armGate) rw(d Device, p []byte, off int64, write bool) error {
	if write && p != nil {
		g.mu.Lock()
		if g.armed && g.left == 0 {
			g.armed = false
			r, h := g.reached, g.hold
			g.mu.Unlock()
			close(r)
			<-h
		} else {
			if g.armed {
				g.left--
			}
			g.mu.Unlock()
		}
	}
	return deviceRW(d, p, off, write)
}

// waitIdle waits until no job runs and no resync kick is pending.
func waitIdle(t *testing.T, a *Array) {
	t.Helper()
	for a.sync.marks.kicking.Load() > 0 || a.sync.busy() {
		time.Sleep(time.Millisecond)
	}
}

// An array without a bitmap: its full resync (job 1) had passed two
// ranges when writes left them unsynced (Executor.Unsynced ->
// markUnsynced), and was then preempted (a rebuild); the resync started
// again (job 2, nextJob) from the lowest mark, was stopped after the first
// mark and before the second, and the array was stopped cleanly. The
// recorded resync offset must be job 2's position, not job 1's higher one
// (past the second mark), or the resumed resync never syncs the second
// range and the copies differ there for good.
func TestFullResyncRestartedLowerRecordsItsPosition(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	g := &armGate{}
	memberRW = g.rw
	t.Cleanup(func() { memberRW = deviceRW })
	g.arm(4)
	a, err := Open(paths, CreateSpec{Name: "t", Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	var lmu sync.Mutex
	a.SetSyncLog(func(msg string, r SyncReport, err error) {
		lmu.Lock()
		log = append(log, msg+": "+r.Kind)
		lmu.Unlock()
		t.Logf("%s %s pos=%d err=%v", msg, r.Kind, r.Position, err)
	})
	a.StartBackground() // job 1: the new array's full sync, from 0
	<-g.reached         // 4 steps of 2048 sectors done, the 5th held
	// Two writes that reached one copy only, below job 1's position.
	for _, off := range []int64{1 << 20, 3 << 20} {
		scribble(t, a, paths[0], off, 4096, 0xaa)
		scribble(t, a, paths[1], off, 4096, 0xbb)
		a.markUnsynced(uint64(off>>9), 8)
	}
	for a.sync.marks.kicking.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
	// Preempted, as addMember's preemptResync does.
	stopJob(a)
	close(g.hold)
	waitIdle(t, a)
	_, pos1 := a.fullResync()
	t.Logf("after job 1: fullPos %d, marks from %d", pos1, a.sync.marks.from)

	// Job 2 (what nextJob starts once the rebuild ends): one step, then held.
	g.arm(1)
	if !a.startResync() {
		t.Fatal("resync not started")
	}
	<-g.reached
	stopJob(a)
	close(g.hold)
	a.StopSync()
	_, pos2 := a.fullResync()
	t.Logf("after job 2: fullPos %d", pos2)
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	memberRW = deviceRW

	sb := superblockOf(t, paths[0])
	t.Logf("recorded: clean %v resync offset %d", sb.Clean, sb.ResyncOffset)
	if sb.ResyncOffset > 3<<20>>9 {
		t.Errorf("resync offset %d recorded, past the unsynced range at sector %d", sb.ResyncOffset, 3<<20>>9)
	}
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.StartBackground()
	b.WaitSync()
	if pending, _ := b.fullResync(); pending {
		t.Fatal("resync still pending")
	}
	d0, d1 := dataOf(t, b, paths[0]), dataOf(t, b, paths[1])
	if !bytes.Equal(d0[3<<20:3<<20+4096], d1[3<<20:3<<20+4096]) {
		t.Fatalf("after the resumed resync finished, the copies differ at 3 MiB: %#x vs %#x", d0[3<<20], d1[3<<20])
	}
}
