package ublk

import "testing"

// A completion that names no tag of the queue (its user data beyond the
// depth: no ublk command of this queue carries it) is a queue error, as
// the check in onIOCmd means it to be, not an index panic that takes the
// whole daemon, and every device it serves, down with it.
func TestIOCmdCompletionBeyondDepth(t *testing.T) {
	q := &Queue{id: 3, depth: 2, state: make([]uint8, 2), live: 2}
	q.state[0], q.state[1] = tagFetched, tagFetched
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("completion for tag 7 of a queue of depth 2 panicked: %v", p)
			}
		}()
		q.onIOCmd(7, 0)
	}()
	if q.err == nil {
		t.Fatal("no queue error for a completion beyond the queue's depth")
	}
	if q.live != 2 || q.state[0] != tagFetched || q.state[1] != tagFetched {
		t.Fatalf("tags touched: live %d states %v", q.live, q.state)
	}
}
