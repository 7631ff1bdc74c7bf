package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// Found by review (fix, f50b8ce): CleanPath falls back to a lexical clean
// when filepath.EvalSymlinks fails, on the ground that such a path names
// nothing to open. But the lexical clean of a path the kernel cannot
// resolve may name an existing device: "<dir>/nosuch/../img0" is ENOENT
// for the kernel (nosuch does not exist), yet CleanPath makes it
// "<dir>/img0", which add-spare then writes as a spare. A path that names
// nothing must be refused, not replaced by another that names something.
func TestReviewFixDotDotThroughMissingDirWritesOtherFile(t *testing.T) {
	const size = 8 << 20
	m, a, _ := servedMirror(t, size)
	dir := t.TempDir()
	other := filepath.Join(dir, "img0")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(other, size); err != nil {
		t.Fatal(err)
	}
	given := dir + "/nosuch/../img0"
	if _, err := os.Stat(given); err == nil {
		t.Fatalf("%s names a file for the kernel", given)
	}
	before := hashes(t, other)
	code, msg := post(t, m, "/arrays/0/add-spare", map[string]string{"member": given})
	sameHashes(t, "add-spare "+given+" (a path naming no file: ENOENT)", before, hashes(t, other))
	if code == http.StatusOK {
		t.Errorf("add-spare %s, a path the kernel cannot open (ENOENT), succeeded: the array holds spares %v (%s, its lexical clean)", given, a.Spares(), other)
	}
	_ = msg
}
