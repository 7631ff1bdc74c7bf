package daemon

import (
	"net/http"
	"strings"
	"testing"
)

// Found by review. README: "replace -n N MEMBER [--with NEW] ...: NEW
// that is MEMBER (under any name) is bad usage" — and MEMBER "is a path or
// a role number". Given as its role number, MEMBER is the same device as
// NEW: bad usage (400, exit 2), not a refusal by the array's state.
func TestReviewDaemonReplaceRoleWithItself(t *testing.T) {
	m, a, paths := servedMirror(t, 8<<20)
	before := hashes(t, paths...)
	code, msg := post(t, m, "/arrays/0/replace", map[string]string{"member": "1", "with": paths[1]})
	if code != http.StatusBadRequest {
		t.Errorf("replace role 1 --with %s (the device holding role 1): %d %q; want 400 (bad usage: NEW is MEMBER)", paths[1], code, msg)
	}
	if st := a.Status(); st.Members[1].State != "active" {
		t.Errorf("role 1 is %s after the refused replace", st.Members[1].State)
	}
	sameHashes(t, "replace of a role with its own device", before, hashes(t, paths...))
}

// The refusal's advice ("use re-add") for the device that holds the role,
// active, leads nowhere: re-add of an active member is refused too.
func TestReviewDaemonReplaceRoleWithItselfAdvice(t *testing.T) {
	m, _, paths := servedMirror(t, 8<<20)
	_, msg := post(t, m, "/arrays/0/replace", map[string]string{"member": "1", "with": paths[1]})
	code2, msg2 := post(t, m, "/arrays/0/re-add", map[string]string{"member": paths[1]})
	if code2 != http.StatusOK && strings.Contains(msg, "use re-add") {
		t.Errorf("replace answered %q, but re-add of that active member answers %d %q", msg, code2, msg2)
	}
}
