package daemon

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Found by review (ops): `re-add -n 0 1` after the member of role 1
// failed and the spare standing by took its role. By the old device's
// path the answer is right ("held role 1, which SPARE holds since"); by
// its role number the daemon re-adds whatever device holds the role now
// (the spare) and answers "role 1 is rebuilding|active: fail and remove
// it first": advice that fails the healthy spare (losing its rebuild, or
// the redundancy it restored), and that names neither the spare nor the
// old device. Nothing in the answer says the role changed hands.
func TestReviewopsReAddRoleTakenBySpareAdvice(t *testing.T) {
	const size = 8 << 20
	m, a, paths := servedMirror(t, size)
	sp := files(t, 1, size)[0]
	if err := a.AddSpare(sp); err != nil {
		t.Fatal(err)
	}
	if code, msg := post(t, m, "/arrays/0/fail", map[string]string{"member": paths[1]}); code != http.StatusOK {
		t.Fatalf("fail: %d %q", code, msg)
	}
	// The spare takes role 1 (its activation runs in the background).
	deadline := time.Now().Add(10 * time.Second)
	for a.Status().Members[1].Path != sp {
		if time.Now().After(deadline) {
			t.Fatalf("the spare did not take role 1: %+v", a.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Its rebuild ends (its superblock writes are not the re-add's).
	for a.WaitSync(); a.Status().Members[1].State != "active"; a.WaitSync() {
		if time.Now().After(deadline) {
			t.Fatalf("the spare's rebuild did not end: %+v", a.Status().Members[1])
		}
		time.Sleep(5 * time.Millisecond)
	}
	// (Not the members' bytes: the bitmap's clears after the rebuild
	// write them in the background.)
	ev := a.Status().Events
	code, msg := post(t, m, "/arrays/0/re-add", map[string]string{"member": "1"})
	t.Logf("re-add 1: %d %q", code, msg)
	if code == http.StatusOK {
		t.Fatalf("re-add of role 1 held by the spare succeeded")
	}
	if got := a.Status().Events; got != ev {
		t.Errorf("refused re-add: events %d, were %d", got, ev)
	}
	if strings.Contains(msg, "fail and remove it first") || !strings.Contains(msg, sp) {
		t.Errorf("re-add of role 1 (held by the spare %s since %s failed): %q: advises failing the spare and does not say the role changed hands", sp, paths[1], msg)
	}
}
