package daemon

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review. A member failed, removed and replaced (its role now held, in sync, by
// the replacement) is given to re-add. The refusal must say why in terms
// of the devices: role 1 belongs to another device now. It used to say
// "role 1 is active: fail and remove it first", naming no device: the
// operator re-adding B reads it as B being active, and the advice, taken,
// fails the healthy replacement D (`fail -n 0 1`), dropping a good copy
// to bring back a stale one; `fail` of B itself answers "not a member".
func TestReviewCliReAddRoleTakenNamesHolder(t *testing.T) {
	const size = 8 << 20
	paths := files(t, 4, size) // A B C: the array; D: B's replacement
	a, err := array.Open(paths[:3], array.CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m := NewManager(nil, ManagerOptions{StateFile: filepath.Join(t.TempDir(), "arrays.json")})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 0, UUID: a.Status().UUID, Members: append([]string(nil), paths[:3]...)}}
	for _, op := range []struct{ path, member, with string }{
		{"/arrays/0/fail", paths[1], ""}, {"/arrays/0/remove", paths[1], ""}, {"/arrays/0/replace", "1", paths[3]},
	} {
		body := map[string]string{"member": op.member}
		if op.with != "" {
			body["with"] = op.with
		}
		if code, msg := post(t, m, op.path, body); code != http.StatusOK {
			t.Fatalf("%s %v: %d %q", op.path, body, code, msg)
		}
	}
	a.WaitSync()
	if st := a.Status(); st.Members[1].Path != paths[3] || st.Members[1].State != "active" {
		t.Fatalf("role 1 after the replace: %+v", st.Members[1])
	}
	before := hashes(t, paths...)
	code, msg := post(t, m, "/arrays/0/re-add", map[string]string{"member": paths[1]})
	t.Logf("re-add of the replaced member: %d %q", code, msg)
	sameHashes(t, "refused re-add", before, hashes(t, paths...))
	if code != http.StatusConflict {
		t.Fatalf("re-add of %s, whose role %s holds now: %d %q; want 409", paths[1], paths[3], code, msg)
	}
	if !strings.Contains(msg, paths[3]) || strings.Contains(msg, "fail and remove it first") {
		t.Errorf("re-add of %s refused with %q: it names no device holding role 1 (%s) and advises failing that role, i.e. the healthy replacement", paths[1], msg, paths[3])
	}
}
