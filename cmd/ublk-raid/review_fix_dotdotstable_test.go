package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// Found by review (fix, 7488383/f50b8ce): absPath (and daemon.CleanPath)
// resolve a path holding ".." with filepath.EvalSymlinks, which resolves
// every symlink of it, the last element too, not only the ones a ".."
// follows. A stable name given with a ".." before it
// (../../dev/disk/by-id/ata-X from a directory two below /) is sent, and
// kept in the daemon's state file and shown by detail, as the kernel name
// it points to today (/dev/sdb), which a reboot may give another disk;
// the same name given without ".." is kept as given. Only the directories
// a ".." steps out of need resolving: "by-id/../by-id/stable0" and
// "work/../by-id/stable0" here name the link by-id/stable0, a file the
// kernel opens as the user's path.
func TestReviewFixDotDotKeepsStableSymlinkName(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"byid", "work"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"sdb", "sdc"} {
		if err := os.WriteFile(filepath.Join(base, n), []byte(n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range []string{"sdb", "sdc"} {
		if err := os.Symlink("../"+n, filepath.Join(base, "byid", []string{"stable0", "stable1"}[i])); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(filepath.Join(base, "work"))
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	if _, stderr, code := runCLI("add", "--socket", sock, "--level", "1", "../byid/stable0", "../byid/stable1"); code != 0 {
		t.Fatalf("add: exit %d %s", code, stderr)
	}
	a, err := daemon.NewClient(sock).Detail(0)
	if err != nil || len(a.Members) != 2 {
		t.Fatalf("detail: %+v %v", a, err)
	}
	for i, n := range []string{"stable0", "stable1"} {
		want := filepath.Join(base, "byid", n)
		if a.Members[i].Path != want {
			t.Errorf("add ../byid/%s (a stable symlink name, in %s): the daemon was sent %s, the link's target today, not %s (the name given, absolute)", n, filepath.Join(base, "work"), a.Members[i].Path, want)
		}
	}
}
