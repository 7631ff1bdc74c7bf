package daemon

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"golang.org/x/sys/unix"
)

// A pending array whose member another holder keeps open (EBUSY: mounted,
// or in another array) is tried once per RetryPending. The retry runs
// under addMu every pendingRetryEvery for a minute; waiting there for the
// member, as the start does for an exiting server (openRetry, 10 s), held
// every add, del and the daemon's shutdown for that long, per entry.
func TestRetryPendingDoesNotWaitForBusyMember(t *testing.T) {
	fakeDevices(t)
	saved := openOnce
	t.Cleanup(func() { openOnce = saved })
	tries := 0
	openOnce = func(members []string, spec array.CreateSpec) (*array.Array, error) {
		tries++
		return nil, fmt.Errorf("member %s is in use: %w", members[0], unix.EBUSY)
	}
	m := NewManager(nil, ManagerOptions{StateFile: filepath.Join(t.TempDir(), "arrays.json")})
	m.pending[0] = StateEntry{Number: 0, UUID: "u0", Members: []string{"/dev/x", "/dev/y"}}
	m.pending[1] = StateEntry{Number: 1, UUID: "u1", Members: []string{"/dev/z", "/dev/w"}}
	if left := m.RetryPending(); left != 2 {
		t.Fatalf("RetryPending left %d pending; want 2", left)
	}
	if tries != 2 {
		t.Errorf("RetryPending made %d assembly attempts for 2 entries whose member is busy; want one each (no wait under addMu)", tries)
	}
}
