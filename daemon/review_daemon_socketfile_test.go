package daemon_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
)

// Found by review. Listen replaces "a socket file left by a daemon that
// died"; it tells one by connect failing with ECONNREFUSED, which Linux
// also answers for a path that is no socket at all. So `serve --socket P`
// with P a regular file (a mistyped flag: --socket and --state-file
// swapped names the state file) deletes that file and serves in its
// place. It must refuse, leaving the file as it was.
func TestReviewDaemonListenKeepsRegularFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "arrays.json")
	want := []byte(`{"version": 1, "arrays": []}` + "\n")
	if err := os.WriteFile(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := daemon.Listen(p)
	if err == nil {
		l.SetUnlinkOnClose(false)
		l.Close()
	}
	got, rerr := os.ReadFile(p)
	if err == nil || rerr != nil || string(got) != string(want) {
		t.Errorf("Listen over the regular file %s: error %v; the file afterwards: %q, %v (want a refusal and the file as it was)", p, err, got, rerr)
	}
}
