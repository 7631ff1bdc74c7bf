package engine

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Queues take numbers and finish writes on their own goroutines while
// another computes checkpoints: no checkpoint ever passes a number whose
// write is not finished.
func TestParityLogClockNeverPassesAWriteOut(t *testing.T) {
	const queues, writes = 4, 20000
	c := NewParityLogClock(7, queues)
	var out [queues]sync.Map // seq -> struct{}: taken, not finished
	var stop atomic.Bool
	var wg sync.WaitGroup
	for q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []uint64 // this queue's writes out, oldest first
			for i := range writes {
				if len(mine) == 0 {
					c.Begin(q)
				}
				s := c.Take()
				out[q].Store(s, struct{}{})
				mine = append(mine, s)
				c.SetOldest(q, mine[0])
				if i%3 == 2 || len(mine) > 5 {
					// The oldest finishes (a FUA write completed).
					out[q].Delete(mine[0])
					mine = mine[1:]
					if len(mine) == 0 {
						c.SetOldest(q, 0)
					} else {
						c.SetOldest(q, mine[0])
					}
				}
			}
			for _, s := range mine {
				out[q].Delete(s)
			}
			c.SetOldest(q, 0)
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			cp := c.Checkpoint()
			for q := range queues {
				out[q].Range(func(k, _ any) bool {
					// A write out must be at or above any checkpoint
					// computed after it was taken... and also before: a
					// number is taken only after Begin or with an older
					// write out, so the checkpoint never got past it.
					if s := k.(uint64); s < cp {
						// It may have finished between the Checkpoint
						// and the Range: check it is still out.
						if _, still := out[q].Load(s); still {
							t.Errorf("checkpoint %d passes write %d of queue %d, still out", cp, s, q)
							stop.Store(true)
						}
					}
					return true
				})
			}
			c.SetPersisted(cp)
		}
	}()
	wg.Wait()
	stop.Store(true)
	<-done
	if cp := c.Checkpoint(); cp != 7+queues*writes {
		t.Fatalf("all finished: checkpoint %d, want %d", cp, 7+queues*writes)
	}
	if p := c.Persisted(); p > c.Checkpoint() {
		t.Fatalf("persisted %d past the checkpoint", p)
	}
	c.SetPersisted(3)
	if c.Persisted() < 7 {
		t.Fatal("the persisted checkpoint moved back")
	}
}

// The interleaving the concurrent test can miss, made to happen: a
// checkpoint computed between a queue's Take and its SetOldest. With
// Begin first it stays at the number taken; without, it would pass it.
func TestParityLogClockBeginBeforeTake(t *testing.T) {
	c := NewParityLogClock(5, 2)
	c.Begin(1)
	s := c.Take()
	if cp := c.Checkpoint(); cp > s {
		t.Fatalf("checkpoint %d passes the number %d just taken", cp, s)
	}
	c.SetOldest(1, s)
	c.SetOldest(1, 0) // finished
	if cp := c.Checkpoint(); cp != s+1 {
		t.Fatalf("all finished: checkpoint %d, want %d", cp, s+1)
	}
	// Without Begin (what it guards against):
	s = c.Take()
	if cp := c.Checkpoint(); cp <= s {
		t.Fatalf("the test does not show the interleaving: checkpoint %d, number %d", cp, s)
	}
}
