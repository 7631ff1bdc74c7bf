package daemon

import (
	"net/http"
	"strings"
	"testing"
)

// Found by review. A member failed and removed is "taken out and its device closed, which
// is then free for other use" (README, remove; array.Remove: "free for
// other users: mdadm --zero-superblock, a new array"). A new array over it
// (`add --level 1 B NEW`) is refused, as it still carries the superblock
// of the array it left: "...; --force overwrites it". With --force it is
// refused again, for good: "array X is served already as /dev/ublkb0: its
// members are assembled once (fail, remove and re-add a member, ...)" -
// it was failed and removed already, and is no member: the array's
// superblocks record its role missing. The first refusal promises what
// the second denies, and the device cannot be reused by any command the
// project has (add --force, add-spare --force and replace --with --force
// of another array all refuse it the same way).
func TestReviewCliCreateOverRemovedMemberWithForce(t *testing.T) {
	fakeDevices(t)
	const size = 8 << 20
	m, a0, p0 := servedMirror(t, size)
	if err := a0.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a0.Remove(1); err != nil {
		t.Fatal(err)
	}
	if st := a0.Status(); st.Members[1].State != "missing" {
		t.Fatalf("role 1 after remove: %+v", st.Members[1])
	}
	blank := files(t, 1, size)[0]
	five := 5
	before := hashes(t, p0[1], blank)
	code, msg := post(t, m, "/arrays", AddRequest{Members: []string{p0[1], blank}, Level: "1", Number: &five})
	if code != http.StatusConflict {
		t.Fatalf("create over the removed %s without --force: %d %q; want 409", p0[1], code, msg)
	}
	sameHashes(t, "refused create", before, hashes(t, p0[1], blank))
	fcode, fmsg := post(t, m, "/arrays", AddRequest{Members: []string{p0[1], blank}, Level: "1", Number: &five, Force: true})
	if strings.Contains(msg, "--force overwrites it") && fcode != http.StatusCreated {
		t.Errorf("create over %s, removed from array 0: refused with %q, then with the --force it offered: %d %q", p0[1], msg, fcode, fmsg)
	}
}

// A member failed but not removed is still the served array's (its role
// entry names it faulty): a create over it is refused, --force or not,
// and nothing is written.
func TestCreateOverFailedNotRemovedMemberRefused(t *testing.T) {
	fakeDevices(t)
	const size = 8 << 20
	m, a0, p0 := servedMirror(t, size)
	if err := a0.Fail(1); err != nil {
		t.Fatal(err)
	}
	blank := files(t, 1, size)[0]
	five := 5
	before := hashes(t, p0[1], blank)
	code, msg := post(t, m, "/arrays", AddRequest{Members: []string{p0[1], blank}, Level: "1", Number: &five, Force: true})
	if code != http.StatusConflict {
		t.Fatalf("create --force over the failed, not removed, %s: %d %q; want 409", p0[1], code, msg)
	}
	sameHashes(t, "refused create", before, hashes(t, p0[1], blank))
}
