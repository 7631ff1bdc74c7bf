package bitmap

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Real goroutines: queue threads hammer a few regions while the flusher
// prepares (up to two batches in flight), "writes" (publishes the states
// to a shared on-disk view) and commits them, with a clear delay so short
// that clears race writes all the time. Run with -race. Checks that a
// write only proceeds when its regions are dirty on disk, stay so until it
// ends, and that no block lands saying clean for a region with a write in
// flight; and that every waiting write is released.
func TestStress(t *testing.T) {
	const (
		queues   = 8
		perQueue = 4000
		regions  = 1500 // 3 blocks of 496 regions, and a few
	)
	// Regions at block edges and a few others.
	var hot []int
	for _, r := range []int{0, 490, 990, 1480} {
		for i := range 12 {
			hot = append(hot, r+i)
		}
	}
	notify := make(chan struct{}, 1)
	b, _ := newTestBitmap(t, regions, 512, 1, InitNeverWritten, Options{
		ClearDelay:    250 * time.Microsecond, // one flusher step
		MaxClearDelay: 250 * time.Microsecond,
		Notify: func() {
			select {
			case notify <- struct{}{}:
			default:
			}
		},
	})
	g := b.Geometry()
	var disk [regions]atomic.Int32   // the on-disk state, as the flusher wrote it
	var issued [regions]atomic.Int32 // writes between "ready" and EndWrite
	var failed atomic.Value
	fail := func(msg string) { failed.CompareAndSwap(nil, msg) }
	release := make([]chan Waiter, queues)
	for q := range release {
		release[q] = make(chan Waiter, 1)
	}

	var wg sync.WaitGroup
	var done atomic.Int32
	for q := range queues {
		wg.Go(func() {
			defer done.Add(1)
			rng := rand.New(rand.NewPCG(uint64(q), 7))
			for i := range perQueue {
				first := hot[rng.IntN(len(hot))]
				last := min(first+rng.IntN(2), regions-1)
				tok := Waiter(q)<<32 | Waiter(i)
				if !b.StartWrite(first, last, tok) {
					select {
					case got := <-release[q]:
						if got != tok {
							fail("wrong token released")
							return
						}
					case <-time.After(10 * time.Second):
						fail("write never released")
						return
					}
				}
				for r := first; r <= last; r++ {
					issued[r].Add(1)
				}
				for range 2 {
					for r := first; r <= last; r++ {
						if State(disk[r].Load()) != Dirty {
							fail("data write to a region not dirty on disk")
						}
					}
					runtime.Gosched()
				}
				for r := first; r <= last; r++ {
					issued[r].Add(-1)
				}
				b.EndWrite(first, last)
				if rng.IntN(8) == 0 {
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
			}
		})
	}

	// The flusher.
	var now time.Duration
	var inflight []*Batch
	var rel []Waiter
	land := func(bt *Batch) {
		for _, blk := range bt.Blocks {
			if blk.Index == 0 {
				continue
			}
			states, _, err := DecodeBlock(blk.Data, &g, blk.Index)
			if err != nil {
				fail(err.Error())
				return
			}
			first, _ := g.BlockRegions(blk.Index)
			for j, s := range states {
				if State(s) != Dirty && issued[first+j].Load() != 0 {
					fail("block lands saying clean while a write is in flight")
				}
				disk[first+j].Store(int32(s))
			}
		}
	}
	commit := func(i int) {
		bt := inflight[i]
		inflight = append(inflight[:i], inflight[i+1:]...)
		land(bt)
		rel = b.Committed(bt, rel[:0])
		for _, tok := range rel {
			release[tok>>32] <- tok
		}
	}
	rng := rand.New(rand.NewPCG(99, 1))
	for done.Load() < queues && failed.Load() == nil {
		select {
		case <-notify:
		case <-time.After(50 * time.Microsecond):
		}
		now += 250 * time.Microsecond
		var bt *Batch
		if rng.IntN(2) == 0 {
			bt = b.Tick(now)
		} else {
			bt = b.Prepare()
		}
		if bt != nil {
			inflight = append(inflight, bt)
		}
		for len(inflight) > 0 && (len(inflight) > 1 || rng.IntN(2) == 0) {
			commit(rng.IntN(len(inflight)))
		}
	}
	for len(inflight) > 0 {
		commit(0)
	}
	wg.Wait()
	if msg := failed.Load(); msg != nil {
		t.Fatal(msg)
	}
	s := b.Stats()
	t.Logf("%d writes, %d waited; %d batches, %d block writes, %d clears (%d redirtied)", queues*perQueue, s.WaitedWrites, s.Batches, s.BlockWrites, s.Cleared, s.Redirtied)
	if s.Cleared < 100 || s.WaitedWrites < 100 {
		t.Fatalf("the stress did not race clears with writes: %+v", s)
	}
	for r := range regions {
		if b.words[r].Load()&inflightMask != 0 {
			t.Fatalf("region %d: writes still in flight", r)
		}
	}
}
