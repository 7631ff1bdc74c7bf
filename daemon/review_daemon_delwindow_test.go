package daemon

import (
	"errors"
	"testing"
)

// Found by review. Delete keeps the array it is deleting in m.deleting
// (and in the state file) from before it asks the kernel until the stop
// is done; a refused stop puts it back, served, "changing nothing". A
// second del of that array meanwhile (del -n N again, or del --all)
// answers 404 "no such array": the CLI then stops /dev/ublkbN directly
// through the kernel (runDel's fallback for devices the daemon does not
// serve), behind the daemon that serves it; and DeleteAll counts the
// 404 as "deleted meanwhile" and answers success although the array is
// still served once the first del is refused. Add in that window is
// refused ("being deleted", TestAddWhileDeletingRefused); del must not
// say the array does not exist. The state is Delete's in that window
// (set directly, as TestAddWhileDeletingRefused does).
func TestReviewDaemonDeleteWhileDeleting(t *testing.T) {
	const n = 1000
	m, s, _, _ := refusingStop(t, n)
	m.mu.Lock()
	delete(m.arrays, n)
	m.deleting[n] = s
	m.mu.Unlock()
	_, err := m.Delete(n)
	if errors.Is(err, ErrNotFound) {
		t.Errorf("del -n %d while another del of it is under way: %v (404: the CLI then stops the served device itself); want a refusal saying it is being deleted", n, err)
	}
	res, err := m.DeleteAll()
	if err == nil && len(res.Deleted) == 0 {
		t.Errorf("del --all while a del of /dev/ublkb%d is under way: success, deleted %v, though the array is not deleted (a refused stop serves it again)", n, res.Deleted)
	}
}
