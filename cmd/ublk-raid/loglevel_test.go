package main

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// Found by review. --log-level is a flag of every command (a persistent
// flag of the root). A malformed value is bad usage: serve, run and
// passthrough refused it (exit 2), but the daemon's clients never parsed
// it, so `add --log-level loud ...` created the array and `detail
// --log-level loud` answered as if the flag were right.
func TestClientsRefuseBadLogLevel(t *testing.T) {
	fake := daemontest.New()
	sock := daemontest.Serve(t, fake)
	for _, args := range [][]string{
		{"add", "--log-level", "loud", "--level", "1", "/dev/a", "/dev/b"},
		{"list", "--log-level", "loud"},
		{"detail", "--log-level", "loud", "-n", "0"},
		{"fail", "--log-level", "loud", "-n", "0", "/dev/a"},
		{"del", "--log-level", "loud", "-n", "0"},
	} {
		wantUsage(t, fake, sock, args, "--log-level")
	}
}
