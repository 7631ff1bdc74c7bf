package daemon

import (
	"net/http"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review. After a restart a failed member is not held (assembly leaves it
// closed); its path still names its role through its superblock, as
// remove finds it (README: "MEMBER is a path or a role number (after a
// restart a failed member's device is not held: its path still finds its
// role through its superblock)"; replace's help: "MEMBER is a member's
// path or its role number"). replace of that failed disk by its path, the
// natural command for a failed disk, answers instead that it "is not a
// member" of the array (404), which detail contradicts (role 1 faulty).
func TestReviewCliReplaceUnheldFailedMemberByPath(t *testing.T) {
	paths := files(t, 3, 8<<20)
	b := restartedWithFailedRole1(t, paths[:2], array.CreateSpec{NoBitmap: true, AssumeClean: true})
	m := NewManager(nil, ManagerOptions{})
	m.arrays[0] = &served{n: 0, a: b, d: &ublk.Device{}, entry: StateEntry{UUID: b.Status().UUID, Members: slices.Clone(paths[:2])}}
	if st := b.Status(); st.Members[1].Path != "" || st.Members[1].State != "faulty" {
		t.Fatalf("after the restart: %+v", st.Members)
	}
	code, msg := post(t, m, "/arrays/0/replace", map[string]string{"member": paths[1], "with": paths[2]})
	b.WaitSync()
	if code != http.StatusOK {
		t.Fatalf("replace of the failed member %s (role 1, left closed by the restart) by its path: %d %q; want it replaced, as remove finds it by that path", paths[1], code, msg)
	}
}
