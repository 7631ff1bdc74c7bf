package engine

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestBarrierCollides(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f1 := rapid.Uint64Range(0, 5000).Draw(t, "f1")
		l1 := f1 + rapid.Uint64Range(0, 1100).Draw(t, "n1")
		f2 := rapid.Uint64Range(0, 5000).Draw(t, "f2")
		l2 := f2 + rapid.Uint64Range(0, 1100).Draw(t, "n2")
		var a, b [barrierBuckets]bool
		for k := f1; k <= l1; k++ {
			a[k%barrierBuckets] = true
		}
		for k := f2; k <= l2; k++ {
			b[k%barrierBuckets] = true
		}
		want := false
		for i := range a {
			want = want || a[i] && b[i]
		}
		if got := collides(f1, l1, f2, l2); got != want {
			t.Fatalf("collides(%d, %d, %d, %d) = %v, want %v", f1, l1, f2, l2, got, want)
		}
	})
}

func TestBarrierBasics(t *testing.T) {
	var woken atomic.Int32
	b := NewBarrier(3, func() { woken.Add(1) })
	ctx := context.Background()
	if !b.Enter(0, 8) {
		t.Fatal("Enter with nothing raised failed")
	}
	raised := make(chan error)
	go func() { raised <- b.Raise(ctx, 4, 16) }()
	select {
	case err := <-raised:
		t.Fatalf("Raise returned (%v) while an overlapping write was in", err)
	case <-time.After(20 * time.Millisecond):
	}
	b.Exit(0, 8)
	if err := <-raised; err != nil {
		t.Fatal(err)
	}
	if b.Enter(16, 1) {
		t.Fatal("Enter of a raised range succeeded")
	}
	if !b.Enter(24, 8) {
		t.Fatal("Enter next to the raised range failed")
	}
	b.Exit(24, 8)
	// Same table entry as the raised buckets, far away: waits too.
	if b.Enter(8*barrierBuckets, 1) {
		t.Fatal("Enter of a colliding bucket succeeded")
	}
	if woken.Load() != 0 {
		t.Fatal("woken before Lower")
	}
	b.Lower()
	if woken.Load() != 1 {
		t.Fatalf("Lower woke %d times, want 1", woken.Load())
	}
	if !b.Enter(16, 1) {
		t.Fatal("Enter after Lower failed")
	}
	b.Exit(16, 1)
	b.Lower()
	if woken.Load() != 1 {
		t.Fatal("Lower with nobody refused woke")
	}

	// ctx cancels a Raise that waits, and lowers.
	b.Enter(100, 1)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := b.Raise(cctx, 0, 200); err == nil {
		t.Fatal("Raise with a write in and a cancelled ctx returned nil")
	}
	if !b.Enter(0, 1) {
		t.Fatal("range still raised after a cancelled Raise")
	}
}

// TestBarrierExclusion hammers Enter/Exit from many goroutines while a sync
// goroutine raises random ranges; a checker of per-sector counters (apart
// from the Barrier) asserts no write is in a range while it is raised.
func TestBarrierExclusion(t *testing.T) {
	const (
		space   = 1 << 14 // sectors
		writers = 8
	)
	dur := 300 * time.Millisecond
	if testing.Short() {
		dur = 50 * time.Millisecond
	}
	for _, shift := range []uint{0, 3, 7} {
		var (
			writing [space]atomic.Int32 // writes in each sector
			syncing [space]atomic.Int32 // raised and held
			fail    atomic.Value
			stop    atomic.Bool
			entered atomic.Int64
			refused atomic.Int64
		)
		wakeCh := make(chan struct{}, 1)
		var mu sync.Mutex
		cond := sync.NewCond(&mu)
		gen := 0
		b := NewBarrier(shift, func() {
			mu.Lock()
			gen++
			mu.Unlock()
			cond.Broadcast()
			select {
			case wakeCh <- struct{}{}:
			default:
			}
		})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 1))
				for !stop.Load() {
					s := rng.Uint64N(space - 64)
					n := uint32(1 + rng.IntN(64))
					for {
						mu.Lock()
						g := gen
						mu.Unlock()
						if b.Enter(s, n) {
							break
						}
						refused.Add(1)
						mu.Lock()
						for gen == g && !stop.Load() {
							cond.Wait()
						}
						mu.Unlock()
						if stop.Load() {
							return
						}
					}
					entered.Add(1)
					for i := s; i < s+uint64(n); i++ {
						writing[i].Add(1)
						if syncing[i].Load() != 0 {
							fail.Store("write entered sector inside a raised range")
						}
					}
					if rng.IntN(4) == 0 {
						time.Sleep(time.Microsecond)
					}
					for i := s; i < s+uint64(n); i++ {
						writing[i].Add(-1)
					}
					b.Exit(s, n)
				}
			}()
		}
		rng := rand.New(rand.NewPCG(99, 1))
		ctx := context.Background()
		raises := 0
		for deadline := time.Now().Add(dur); time.Now().Before(deadline); raises++ {
			s := rng.Uint64N(space - 2048)
			n := 1 + rng.Uint64N(2048)
			if err := b.Raise(ctx, s, n); err != nil {
				t.Fatal(err)
			}
			for i := s; i < s+n; i++ {
				syncing[i].Store(1)
				if writing[i].Load() != 0 {
					fail.Store("raised range holds a write")
				}
			}
			time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
			for i := s; i < s+n; i++ {
				if writing[i].Load() != 0 {
					fail.Store("write entered a held range")
				}
				syncing[i].Store(0)
			}
			b.Lower()
		}
		stop.Store(true)
		mu.Lock()
		gen++
		mu.Unlock()
		cond.Broadcast()
		wg.Wait()
		if f := fail.Load(); f != nil {
			t.Fatalf("shift %d: %s", shift, f)
		}
		if entered.Load() == 0 || refused.Load() == 0 || raises < 10 {
			t.Fatalf("shift %d: too little contention: %d entered, %d refused, %d raises", shift, entered.Load(), refused.Load(), raises)
		}
		for i := range barrierBuckets {
			if n := b.slots[i].n.Load(); n != 0 {
				t.Fatalf("shift %d: slot %d count %d after all writes exited", shift, i, n)
			}
		}
		t.Logf("shift %d: %d writes, %d refused, %d raises", shift, entered.Load(), refused.Load(), raises)
	}
}

func TestBarrierNoAlloc(t *testing.T) {
	b := NewBarrier(11, nil)
	if n := testing.AllocsPerRun(1000, func() {
		if b.Enter(12345, 8) {
			b.Exit(12345, 8)
		}
	}); n != 0 {
		t.Fatalf("Enter+Exit: %v allocs", n)
	}
}

func BenchmarkBarrierEnterExit(b *testing.B) {
	bar := NewBarrier(11, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := rand.Uint64N(1 << 30)
		for pb.Next() {
			s += 8
			if bar.Enter(s, 8) {
				bar.Exit(s, 8)
			}
		}
	})
}
