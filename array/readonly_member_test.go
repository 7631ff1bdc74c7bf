package array

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// loopDevices attaches n loop devices over fresh files of size bytes
// (skipping without root and losetup) and detaches them at the end.
func loopDevices(t *testing.T, n int, size int64) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (loop devices)")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("needs losetup")
	}
	var loops []string
	for range n {
		f := filepath.Join(t.TempDir(), "m")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(f, size); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("losetup", "--find", "--show", f).CombinedOutput()
		if err != nil {
			t.Skipf("losetup: %v: %s", err, out)
		}
		loop := strings.TrimSpace(string(out))
		// The read-only flag is the block device's: it outlives a detach
		// and would greet the next user of the loop device.
		t.Cleanup(func() {
			exec.Command("blockdev", "--setrw", loop).Run()
			exec.Command("losetup", "-d", loop).Run()
		})
		setRO(t, loop, false)
		loops = append(loops, loop)
	}
	return loops
}

// setRO makes the block device at path read-only (or writable again).
func setRO(t *testing.T, path string, ro bool) {
	t.Helper()
	flag := "--setrw"
	if ro {
		flag = "--setro"
	}
	if out, err := exec.Command("blockdev", flag, path).CombinedOutput(); err != nil {
		t.Skipf("blockdev %s: %v: %s", flag, err, out)
	}
}

// A read-only block device opens read-write (the kernel refuses only
// the writes, EPERM): create and add-spare must refuse it before
// anything is written, not after the superblocks of the devices before
// it went out. A member of an array that went read-only since (a
// worn-out NVMe namespace) still assembles: the array runs without it.
func TestCreateRefusesReadOnlyMember(t *testing.T) {
	loops := loopDevices(t, 3, 8<<20)
	setRO(t, loops[1], true)
	before, err := os.ReadFile(loops[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		a, err := Open(loops[:2], CreateSpec{Level: engine.Level1, NoBitmap: true, Force: force}, true)
		if err == nil {
			a.Close()
			t.Fatal("create over a read-only member succeeded")
		}
		if !strings.Contains(err.Error(), loops[1]+" is read-only") {
			t.Errorf("error %q does not say the device is read-only", err)
		}
	}
	after, err := os.ReadFile(loops[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("the refused create wrote to %s", loops[0])
	}

	setRO(t, loops[1], false)
	a, err := Open(loops[:2], CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	setRO(t, loops[2], true)
	if err := a.AddSpares(loops[2:], true); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("add-spare of a read-only device: %v", err)
	}
	a.Close()

	setRO(t, loops[1], true)
	a, err = Open(loops[:2], CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("assembly with a member gone read-only: %v", err)
	}
	a.Close()
}

// A member that went read-only after the array opened it is refused by
// re-add before any superblock is written, not at its own write after
// the others' (a refused command must leave every member's bytes).
func TestReAddRefusesMemberGoneReadOnly(t *testing.T) {
	loops := loopDevices(t, 2, 8<<20)
	a, err := Open(loops, CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	setRO(t, loops[1], true)
	defer setRO(t, loops[1], false)
	sb := func() [][]byte {
		var out [][]byte
		for _, p := range loops {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 1<<20)
			if _, err := f.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			out = append(out, b)
		}
		return out
	}
	before := sb()
	err = a.ReAdd(loops[1])
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("re-add of a member gone read-only: %v, want a read-only refusal", err)
	}
	for i, b := range sb() {
		if !bytes.Equal(b, before[i]) {
			t.Fatalf("the refused re-add changed the metadata area of %s", loops[i])
		}
	}
}
