package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A device number beyond any ublk device is bad usage, refused before
// anything is opened. Without a daemon, del -n N and recover -n N act on
// the kernel's device uint32(N) directly: 4294967296 was device 0, so
// `del -n 4294967296` stopped and deleted /dev/ublkb0, and `recover -n
// 4294967296 MEMBER` re-attached /dev/ublkb0 to another member.
func TestDeviceNumberOutOfRange(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "control.sock") // no daemon
	member := filepath.Join(t.TempDir(), "m")
	if err := os.WriteFile(member, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"del", "-n", "4294967296"},
		{"del", "-n", "1048576"},
		{"recover", "-n", "4294967296", member},
		{"passthrough", "-n", "4294967296", member},
		{"run", "--recover", "-n", "4294967296", member},
	} {
		_, stderr, code := runCLI(withSocket(sock, args)...)
		if code != exitUsage || !strings.Contains(stderr, "4294967296") && !strings.Contains(stderr, "1048576") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming the number", args, code, stderr, exitUsage)
		}
	}
	if b, _ := os.ReadFile(member); !bytes.Equal(b, make([]byte, 2<<20)) {
		t.Fatal("member was written")
	}
}
