package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// Found by review. A relative member path is made absolute for the daemon; it must still
// name the file the user named. From a directory entered through a
// symlink (cd /srv/disks, a link to /data/pool/disks; the shell's PWD
// keeps the link), "../img0" is, for the kernel and every other command,
// /data/pool/img0. filepath.Abs joins it to $PWD and cleans it
// lexically: /srv/img0, another file, which add then sends to be written
// as a new array's member (a decoy here; a user's data elsewhere).
func TestReviewCliRelativePathThroughSymlinkNamesSameFile(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "pool", "disks")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "srv")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(base, "pool", "img0"), filepath.Join(base, "pool", "img1"), // what ../imgN names
		filepath.Join(base, "img0"), filepath.Join(base, "img1")} { // what a lexical clean of srv/../imgN names
		if err := os.WriteFile(p, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(link) // as a shell's cd: PWD is the link's path
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	if _, stderr, code := runCLI("add", "--socket", sock, "--level", "1", "../img0", "../img1"); code != 0 {
		t.Fatalf("add: exit %d %s", code, stderr)
	}
	a, err := daemon.NewClient(sock).Detail(0)
	if err != nil || len(a.Members) != 2 {
		t.Fatalf("detail: %+v %v", a, err)
	}
	for i, rel := range []string{"../img0", "../img1"} {
		want, err := os.Stat(rel) // the file the kernel opens for the user's path
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.Stat(a.Members[i].Path)
		if err != nil || !os.SameFile(want, got) {
			t.Errorf("add %s (in %s, reached through a symlink): the daemon was sent %s, another file than %s names (%s)",
				rel, link, a.Members[i].Path, rel, filepath.Join(base, "pool", filepath.Base(rel)))
		}
	}
}
