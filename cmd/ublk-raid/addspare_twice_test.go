package main

import (
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// Found by review. add -n N --spare DEV --spare DEV names one device twice: bad usage, as
// a member or spare given twice to add with members is, refused with one
// line naming --spare before the daemon is asked (with no daemon running
// too).
func TestAddSpareGivenTwiceIsUsage(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	for _, s := range []string{sock, t.TempDir() + "/no-daemon.sock"} {
		args := []string{"add", "--socket", s, "-n", "0", "--spare", "/dev/c", "--spare", "/dev/c"}
		_, stderr, code := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, "--spare") {
			t.Errorf("%q: exit %d, stderr %q; want exit %d naming --spare", args, code, strings.TrimSpace(stderr), exitUsage)
		}
	}
	if n := fake.Requests.Load(); n != 0 {
		t.Errorf("the refused command reached the daemon %d time(s)", n)
	}
}
