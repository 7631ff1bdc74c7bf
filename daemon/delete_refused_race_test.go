package daemon

import (
	"sync/atomic"
	"testing"
)

// Found by review. A del whose stop the kernel refuses must leave the state file as it
// was, whatever else the daemon does meanwhile. Delete took the array out
// of the served arrays before it asked the kernel, and put it back after
// the refusal without writing the state file again, so a state file write
// by any other operation in that window (an add, a member operation on
// another array, a pending retry: here saveState standing for them)
// dropped the still served array from the state file for good, and a
// restarted daemon forgot it.
func TestDeleteRefusedStopConcurrentStateWrite(t *testing.T) {
	const n = 1000
	m, _, _, state := refusingStop(t, n)
	for i := range 3000 {
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !stop.Load() {
				m.saveState()
			}
		}()
		if _, err := m.Delete(n); err == nil {
			t.Fatal("del succeeded")
		}
		stop.Store(true)
		<-done
		st, err := LoadState(state)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range st.Arrays {
			found = found || e.Number == n
		}
		if !found {
			m.mu.Lock()
			served := m.arrays[n] != nil
			m.mu.Unlock()
			t.Fatalf("iteration %d: after a refused del, /dev/ublkb%d (still served: %v) is gone from the state file", i, n, served)
		}
	}
}
