package ublk

import (
	"errors"
	"testing"
)

type countTicker struct{ ticks int }

func (t *countTicker) OnTick() { t.ticks++ }

// A failed queue only drains its member I/O for the next server: its
// handler gets no tick, which would give up operations (at the member
// timeout) that the next server is to reissue, or that the ring never
// took.
func TestFailedQueueGetsNoTick(t *testing.T) {
	tk := &countTicker{}
	q := &Queue{live: 1, ticker: tk, ring: newTestRing(t, 8, RingOptions{})}
	q.fail(errors.New("ring refused a member operation"))
	q.onTick()
	if tk.ticks != 0 {
		t.Fatalf("a failed queue's handler got %d tick(s); want none", tk.ticks)
	}
}
