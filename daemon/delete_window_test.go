package daemon

import (
	"context"
	"strings"
	"testing"
)

// Found by review. Delete keeps the array it deletes in m.deleting,
// which saveState writes, from before it asks the kernel until m.stop has
// closed the array (StopSync, SetClean, Close: after DEL_DEV, so
// /dev/ublkbN is gone and its number free for the kernel). An add in
// that window (add -n N, or an add without -n whose firstFree took N:
// neither looked at m.deleting) recorded its array pending at N and
// wrote the state file: it then named device N twice, a state no daemon
// writes (State.check), which a daemon restarted before Delete's own
// write refused to load. Such an add is now refused, nothing written. The
// state here is Delete's in that window (set directly: the array out of
// m.arrays, in m.deleting).
func TestAddWhileDeletingRefused(t *testing.T) {
	const n = 1000
	m, s, _, _ := refusingStop(t, n)
	m.mu.Lock()
	delete(m.arrays, n)
	m.deleting[n] = s
	m.mu.Unlock()
	orig := writeState
	writeState = func(path string, st State) error {
		if cerr := st.check(); cerr != nil {
			t.Fatalf("an add at /dev/ublkb%d while its del was closing the array wrote a state file a daemon refuses to load: %v", n, cerr)
		}
		t.Fatalf("an add at /dev/ublkb%d while its del was closing the array wrote the state file", n)
		return orig(path, st)
	}
	t.Cleanup(func() { writeState = orig })
	num := n
	_, err := m.Add(context.Background(), AddRequest{Members: files(t, 2, 8<<20), Level: "1", Number: &num})
	if err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("add at a number being deleted: %v, want a refusal", err)
	}
}
