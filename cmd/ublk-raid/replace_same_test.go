package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// Found by review. replace -n N MEMBER --with NEW where NEW is MEMBER
// itself (under its own name or another: a symlink to it) gives the same
// device twice: bad usage (exit 2, one line), refused before any request
// reaches the daemon, as add refuses a device given twice under any name.
// It was sent to the daemon.
func TestReplaceWithItself(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	dir := t.TempDir()
	m := filepath.Join(dir, "m")
	if err := os.WriteFile(m, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(dir, "alias")
	if err := os.Symlink(m, alias); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if _, stderr, code := runCLI("add", "--socket", sock, "--level", "1", m, other); code != 0 {
		t.Fatalf("add: exit %d %s", code, stderr)
	}
	wantUsage(t, fake, sock, []string{"replace", "-n", "0", m, "--with", m}, "twice")
	wantUsage(t, fake, sock, []string{"replace", "-n", "0", m, "--with", alias}, "twice")
}
