package array

import (
	"context"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// The rebuild's Progress (3c7360d) raised a bare stripeBarrier, outside
// the exclusiveBarrier the read-repair worker and the rebuild steps share:
// two sync-side waiters on the stripe lock at once, one wake-up channel
// of capacity 1 (syncWake). A wake-up for the repair's stripe taken by
// Progress (which waits on another stripe) is lost: once both stripes
// are free, one of them still waits; Progress waits with
// context.Background(), so StopSync / Close then hung. Found by review;
// Progress now raises the shared barrier, with the job's context.
func TestParityProgressAndRepairShareOneWake(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ParityLayout: engine.LeftSymmetric, ChunkSectors: 16, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	g := *a.Engine.Parity
	cs := g.ChunkSectors
	per := cs * uint64(g.DataMembers())
	const target = 1
	st := a.Engine.Update(func(ms []engine.MemberStatus) {
		ms[target].State = engine.MemberRebuilding
		ms[target].RebuildOffset = 0
	})
	since := st.Members[target].Since
	lock := a.parityStripeLock()
	tokA, tokB := engine.StripeToken(0, 1), engine.StripeToken(1, 1)
	// Two user writes out: one on stripe 1 (which Progress passes), one
	// on stripe 10 (which a read repair wants).
	if ok, _ := lock.TryLock(1, 1, tokA, 0); !ok {
		t.Fatal("lock 1")
	}
	if ok, _ := lock.TryLock(10, 10, tokB, 1); !ok {
		t.Fatal("lock 10")
	}
	for len(a.syncWake) > 0 {
		<-a.syncWake
	}
	progress := a.rebuildProgress(context.Background(), []int{target}, []uint64{since})
	pDone := make(chan error, 1)
	go func() { pDone <- progress(3*cs, 0) }() // passes stripes 0..2
	time.Sleep(200 * time.Millisecond)
	rDone := make(chan error, 1)
	go func() {
		err := a.xbar.Raise(context.Background(), 10*per, per) // as repairParity
		if err == nil {
			a.xbar.Lower()
		}
		rDone <- err
	}()
	time.Sleep(200 * time.Millisecond)
	// The write on stripe 10 ends, then the one on stripe 1.
	lock.Unlock(10, 10, tokB)
	time.Sleep(200 * time.Millisecond)
	lock.Unlock(1, 1, tokA)
	var pOK, rOK bool
	deadline := time.After(3 * time.Second)
	for !(pOK && rOK) {
		select {
		case err := <-pDone:
			if err != nil {
				t.Fatal(err)
			}
			pOK = true
		case err := <-rDone:
			if err != nil {
				t.Fatal(err)
			}
			rOK = true
		case <-deadline:
			t.Fatalf("every stripe is free, yet still waiting: rebuild Progress done %v, read repair's barrier done %v (a wake-up on syncWake was lost)", pOK, rOK)
		}
	}
	if got := a.Engine.State().Members[target].RebuildOffset; got != 3*cs {
		t.Fatalf("offset %d", got)
	}
	a.Close()
}
