package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review. A re-add of a member into its role while another device holds that role
// failed (B failed, removed and replaced by D; D failed; B re-added) lets
// D go: the array closes it and no longer shows it. The state file must
// follow, as replace and a spare's activation drop the device they
// displace: re-add left D listed, so once D is reused (wiped, here), the
// next start of the daemon opens it among the members, finds no
// superblock of the array there and leaves the array pending, where md's
// assembly by UUID starts it (D is no member of it any more).
func TestReviewCliReAddOverFailedHolderDropsItFromState(t *testing.T) {
	const size = 8 << 20
	paths := files(t, 4, size) // A B C: the array; D: B's replacement
	a, err := array.Open(paths[:3], array.CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 0, UUID: a.Status().UUID, Members: slices.Clone(paths[:3])}}
	if err := m.saveState(); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		path string
		body map[string]string
	}{
		{"/arrays/0/fail", map[string]string{"member": paths[1]}},
		{"/arrays/0/remove", map[string]string{"member": paths[1]}},
		{"/arrays/0/replace", map[string]string{"member": "1", "with": paths[3]}},
		{"wait", nil},
		{"/arrays/0/fail", map[string]string{"member": paths[3]}},
		{"/arrays/0/re-add", map[string]string{"member": paths[1]}},
		{"wait", nil},
	} {
		if op.path == "wait" {
			a.WaitSync()
			continue
		}
		if code, msg := post(t, m, op.path, op.body); code != http.StatusOK {
			t.Fatalf("%s %v: %d %q", op.path, op.body, code, msg)
		}
	}
	st := a.Status()
	if st.Members[1].Path != paths[1] || slices.Contains(memberPaths(st), paths[3]) {
		t.Fatalf("after the re-add: %+v", st.Members)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	saved, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("state file members after the re-add: %v", saved.Arrays[0].Members)
	// D, let go of by the array, is reused: wiped. Then the daemon restarts.
	if err := os.WriteFile(paths[3], make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	fakeDevices(t)
	m2 := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := m2.Restore()
	if s := m2.arrays[0]; s != nil {
		t.Cleanup(func() { s.a.SetClean(true); s.a.Close() })
	}
	if err != nil || started != 1 || failed != 0 {
		t.Fatalf("restart after re-adding %s over the failed %s and reusing %s: %d started, %d pending (%v); want the array started (state file lists %v)",
			paths[1], paths[3], paths[3], started, failed, err, saved.Arrays[0].Members)
	}
}
