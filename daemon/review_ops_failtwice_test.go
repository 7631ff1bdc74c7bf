package daemon

import (
	"net/http"
	"testing"
)

// Found by review (ops): `fail` of a member that is faulty already (the
// daemon failed it on an I/O error a moment before, or the first fail's
// answer was lost and the script retries) is refused with 409, so the CLI
// exits 1 and a `fail X && remove X` never removes it. md's
// SET_DISK_FAULTY of a Faulty rdev calls md_error again, which is a no-op,
// and answers 0: mdadm --fail says "set X faulty" and exits 0. Nothing is
// refused here: the member is faulty, as asked.
func TestReviewopsFailOfFaultyMemberSucceeds(t *testing.T) {
	m, a, paths := servedMirror(t, 8<<20)
	if code, msg := post(t, m, "/arrays/0/fail", map[string]string{"member": paths[1]}); code != http.StatusOK {
		t.Fatalf("first fail: %d %q", code, msg)
	}
	ev := a.Status().Events
	code, msg := post(t, m, "/arrays/0/fail", map[string]string{"member": paths[1]})
	if code != http.StatusOK {
		t.Errorf("fail of the member already faulty: %d %q; want 200 as mdadm --fail answers (nothing to refuse)", code, msg)
	}
	if a.Status().Events != ev || a.Status().Members[1].State != "faulty" {
		t.Errorf("second fail changed the array: %+v", a.Status())
	}
}
