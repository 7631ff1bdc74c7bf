package daemon

import (
	"slices"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review. After a restart a failed member is not held (assembly leaves it
// closed; detail shows its role faulty, without a device).
// re-add by role number of that role answers "role 1 holds no device
// (removed)": the role is faulty, not removed (detail says faulty; remove
// of it would be the removal).
func TestReviewCliReAddUnheldFailedRoleNotRemoved(t *testing.T) {
	paths := files(t, 2, 8<<20)
	b := restartedWithFailedRole1(t, paths, array.CreateSpec{NoBitmap: true, AssumeClean: true})
	m := NewManager(nil, ManagerOptions{})
	m.arrays[0] = &served{n: 0, a: b, d: &ublk.Device{}, entry: StateEntry{UUID: b.Status().UUID, Members: slices.Clone(paths)}}
	code, msg := post(t, m, "/arrays/0/re-add", map[string]string{"member": "1"})
	if st := b.Status().Members[1].State; strings.Contains(msg, "removed") && st != "missing" {
		t.Errorf("re-add 1: %d %q; role 1 is %s, not removed", code, msg, st)
	}
}
