package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// Found by review. add-spare (as re-add and replace --with) names the new device by
// known(), which returns the path lexically cleaned when the array holds
// no such device: "/srv/../img0", where /srv is a symlink to
// /data/pool/disks, names /data/pool/img0 for the kernel, and the daemon
// opens /img0 beside /srv instead, another device, and writes it as a
// spare (a decoy here; a user's data elsewhere).
func TestReviewCliAddSpareDotDotThroughSymlink(t *testing.T) {
	const size = 8 << 20
	m, a, _ := servedMirror(t, size)
	base := t.TempDir()
	real := filepath.Join(base, "pool", "disks")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "srv")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(base, "pool", "img0") // what link/../img0 names
	decoy := filepath.Join(base, "img0")         // its lexical clean
	for _, p := range []string{named, decoy} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
	}
	decoyBefore := hashes(t, decoy)
	given := link + "/../img0"
	code, msg := post(t, m, "/arrays/0/add-spare", map[string]string{"member": given})
	if code != http.StatusOK {
		t.Fatalf("add-spare %s: %d %q", given, code, msg)
	}
	sameHashes(t, "add-spare "+given+" (names "+named+")", decoyBefore, hashes(t, decoy))
	want, _ := os.Stat(named)
	for _, sp := range a.Spares() {
		if got, err := os.Stat(sp); err != nil || !os.SameFile(got, want) {
			t.Errorf("add-spare %s: the array holds %s as the spare, not %s, which the path names", given, sp, named)
		}
	}
}
