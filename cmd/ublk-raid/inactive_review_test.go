package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// An array of the state file that did not start (members blank here), as
// the commands show it through a real Manager.
func inactiveDaemon(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var members []string
	for _, n := range []string{"x", "y"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, make([]byte, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		members = append(members, p)
	}
	state := filepath.Join(dir, "arrays.json")
	if err := daemon.SaveState(state, daemon.State{Arrays: []daemon.StateEntry{{Number: 3, UUID: "0123", Name: "tank", Members: members}}}); err != nil {
		t.Fatal(err)
	}
	m := daemon.NewManager(nil, daemon.ManagerOptions{StateFile: state})
	if started, failed, err := m.Restore(); err != nil || started != 0 || failed != 1 {
		t.Fatalf("restore: %d %d %v", started, failed, err)
	}
	return daemontest.Serve(t, m)
}

// Found by review. List's text: every column of the inactive array's line is filled (a
// dash for what is unknown, as NAME), so that `awk '{print $5}'` reads
// DISKS on every line: an empty LEVEL shifts the columns.
func TestListTextInactiveColumns(t *testing.T) {
	sock := inactiveDaemon(t)
	out, stderr, code := runCLI(withSocket(sock, []string{"list"})...)
	if code != 0 {
		t.Fatalf("list: exit %d %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	hdr := strings.Fields(lines[0])
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "/dev/ublkb3") {
			continue
		}
		f := strings.Fields(l)
		if len(f) < len(hdr) || f[3] != "inactive" {
			t.Fatalf("list of an inactive array:\n%s\nfields %q: column STATE is %q (header %q)", out, f, f[3], hdr)
		}
		return
	}
	t.Fatalf("list does not show the inactive array:\n%s", out)
}

// Found by review. Detail --test of an array list shows as inactive: the array is not
// running, so its data is not available: exit 2 (as mdadm --detail
// --test of an inactive array that cannot run), not 4 "cannot tell".
func TestDetailTestInactive(t *testing.T) {
	sock := inactiveDaemon(t)
	out, stderr, code := runCLI(withSocket(sock, []string{"detail", "--test", "-n", "3"})...)
	if code != testFailed {
		t.Errorf("detail --test -n 3 of the array list shows inactive: exit %d, stdout %q stderr %q", code, out, stderr)
	}
}
