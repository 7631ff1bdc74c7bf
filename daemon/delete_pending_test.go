package daemon

import (
	"path/filepath"
	"testing"
	"time"
)

// del of a pending entry while a RetryPending holds it (addMu: the retry
// took its copy of the entries and is assembling them) must wait for the
// retry: dropping the entry meanwhile reported it forgotten, and the
// retry then started and served the array anyway.
func TestDeletePendingWaitsForRetry(t *testing.T) {
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.pending[3] = StateEntry{Number: 3, UUID: "u3", Members: []string{"/dev/x", "/dev/y"}}
	m.addMu.Lock() // a RetryPending under way
	done := make(chan error, 1)
	go func() {
		_, err := m.Delete(3)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("del of a pending entry returned (%v) while a retry of it was under way", err)
	case <-time.After(100 * time.Millisecond):
	}
	m.mu.Lock()
	_, still := m.pending[3]
	m.mu.Unlock()
	if !still {
		t.Fatal("the pending entry was dropped while a retry of it was under way")
	}
	m.addMu.Unlock() // the retry ends: the array did not start
	if err := <-done; err != nil {
		t.Fatalf("del after the retry: %v", err)
	}
	m.mu.Lock()
	_, still = m.pending[3]
	m.mu.Unlock()
	if still {
		t.Fatal("the pending entry was kept")
	}
}
