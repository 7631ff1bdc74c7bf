package engine

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestStripeLockAllOrNothing(t *testing.T) {
	var woken []int
	l := NewStripeLock(func(q int) { woken = append(woken, q) })
	a, b := StripeToken(0, 1), StripeToken(1, 7)
	if ok, _ := l.TryLock(10, 12, a, 0); !ok {
		t.Fatal("free stripes 10-12 not taken")
	}
	// 8-11 overlaps: none of 8-11 may stay taken by b.
	if ok, retry := l.TryLock(8, 11, b, 1); ok || retry {
		t.Fatalf("overlapping TryLock: ok %v retry %v; want a wait", ok, retry)
	}
	if ok, _ := l.TryLock(8, 9, StripeToken(2, 0), 2); !ok {
		t.Fatal("stripes 8-9 stayed taken after the failed all-or-nothing TryLock")
	}
	l.Unlock(8, 9, StripeToken(2, 0))
	l.Unlock(10, 12, a)
	if len(woken) == 0 || woken[len(woken)-1] != 1 {
		t.Fatalf("queue 1 waited and was not woken by the unlock: woken %v", woken)
	}
	if ok, _ := l.TryLock(8, 11, b, 1); !ok {
		t.Fatal("stripes 8-11 not taken once free")
	}
	// Stripes a table apart share a slot: they exclude each other.
	if ok, _ := l.TryLock(8+stripeLockSlots, 8+stripeLockSlots, a, 0); ok {
		t.Fatal("a stripe sharing a slot with a held one was taken")
	}
	l.Unlock(8, 11, b)
	// A range as large as the table takes every slot.
	if ok, _ := l.TryLock(0, 3*stripeLockSlots, a, 0); !ok {
		t.Fatal("a range over the whole table not taken when free")
	}
	if ok, _ := l.TryLock(77, 77, b, 1); ok {
		t.Fatal("a stripe taken while a range over the whole table is held")
	}
	l.Unlock(0, 3*stripeLockSlots, a)
	defer func() {
		if recover() == nil {
			t.Fatal("Unlock by a token that holds nothing did not panic")
		}
	}()
	l.Unlock(5, 5, a)
}

// An Unlock that slips in between a failed TryLock's compare-and-swap and
// its waiter mark sees no waiter and wakes nobody: the TryLock must see
// the stripe free and say to retry at once, or the request would wait
// for a wake-up that never comes.
func TestStripeLockUnlockBeforeWaiterMark(t *testing.T) {
	woken := map[int]int{}
	l := NewStripeLock(func(b int) { woken[b]++ })
	h, w := StripeToken(0, 1), StripeToken(1, 2)
	if ok, _ := l.TryLock(3, 3, h, 0); !ok {
		t.Fatal("free stripe not taken")
	}
	stripeLockRace = func() { l.Unlock(3, 3, h) }
	ok, retry := l.TryLock(3, 3, w, 1)
	stripeLockRace = nil
	if ok {
		t.Fatal("taken while held")
	}
	if !retry && woken[1] == 0 {
		t.Fatal("the holder let go between the waiter's attempt and its mark: no retry and no wake-up (a lost wake-up)")
	}
	// A queue that failed on a stripe another TryLock held only for a
	// moment (all or none: it lets go) is woken when it lets go.
	clear(woken)
	if ok, _ := l.TryLock(8, 8, h, 0); !ok {
		t.Fatal("free stripe not taken")
	}
	c := StripeToken(3, 0)
	stripeLockRace = func() {
		stripeLockRace = nil
		if ok, retry := l.TryLock(7, 7, c, 3); ok || retry {
			t.Fatal("stripe 7 is held for a moment: want a wait")
		}
	}
	if ok, _ := l.TryLock(7, 8, w, 1); ok {
		t.Fatal("stripes 7-8 taken while 8 is held")
	}
	stripeLockRace = nil
	if woken[3] != 1 {
		t.Fatalf("queue 3 failed on stripe 7, which the all-or-none TryLock let go: woken %v", woken)
	}
	if ok, _ := l.TryLock(7, 7, c, 3); !ok {
		t.Fatal("stripe 7 not taken once let go")
	}
	l.Unlock(7, 7, c)
	l.Unlock(8, 8, h)
	// Waiters on one stripe are not woken by another's release, and a
	// queue beyond 64 is woken through its bit (queue mod 64).
	clear(woken)
	if ok, _ := l.TryLock(5, 5, h, 0); !ok {
		t.Fatal("free stripe not taken")
	}
	if ok, _ := l.TryLock(6, 6, StripeToken(2, 0), 2); !ok {
		t.Fatal("free stripe not taken")
	}
	if ok, retry := l.TryLock(5, 5, StripeToken(70, 0), 70); ok || retry {
		t.Fatal("stripe 5 is held: want a wait")
	}
	l.Unlock(6, 6, StripeToken(2, 0))
	if len(woken) != 0 {
		t.Fatalf("releasing stripe 6 woke %v, who wait on stripe 5", woken)
	}
	l.Unlock(5, 5, h)
	if woken[70%64] != 1 || len(woken) != 1 {
		t.Fatalf("releasing stripe 5 woke %v; want bit %d (queue 70)", woken, 70%64)
	}
}

// Queues (goroutines) lock random stripe ranges, parking on failure until
// woken as queue threads do: two holders never share a stripe, and every
// queue gets all of its locks (no lost wake-up, no deadlock).
func TestStripeLockConcurrent(t *testing.T) {
	const queues, rounds, stripes = 4, 3000, 16
	wakes := make([]chan struct{}, queues)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	l := NewStripeLock(func(q int) {
		select {
		case wakes[q] <- struct{}{}:
		default:
		}
	})
	var inUse [stripes]atomic.Int32
	var wg sync.WaitGroup
	done := make(chan struct{})
	for q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(q), 9))
			for i := range rounds {
				first := r.Uint64N(stripes)
				last := min(first+r.Uint64N(3), stripes-1)
				tok := StripeToken(q, uint16(i))
				for {
					ok, retry := l.TryLock(first, last, tok, q)
					if ok {
						break
					}
					if !retry {
						select {
						case <-wakes[q]:
						case <-time.After(10 * time.Second):
							t.Errorf("queue %d waited 10 s for stripes %d-%d: a lost wake-up", q, first, last)
							return
						}
					}
				}
				for s := first; s <= last; s++ {
					if inUse[s].Add(1) != 1 {
						t.Errorf("stripe %d held by two requests", s)
					}
				}
				runtime.Gosched() // let the others try while it is held
				if i%64 == 0 {
					time.Sleep(time.Microsecond)
				}
				for s := first; s <= last; s++ {
					inUse[s].Add(-1)
				}
				l.Unlock(first, last, tok)
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("queues did not finish: deadlock or lost wake-up")
	}
}

func BenchmarkStripeLock(b *testing.B) {
	l := NewStripeLock(nil)
	tok := StripeToken(0, 1)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		if ok, _ := l.TryLock(i, i, tok, 0); !ok {
			b.Fatal("not taken")
		}
		l.Unlock(i, i, tok)
	}
}
