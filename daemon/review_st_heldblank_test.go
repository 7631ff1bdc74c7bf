package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (st). A mirror's member fails (recorded faulty in the
// survivor's superblock) and its disk is pulled; at the next boot the
// state file's path for it (/dev/sdc: kernel names follow probe order)
// names another disk, one in use (a mounted filesystem: O_EXCL fails,
// EBUSY) holding no superblock of the array. The package comment: "a
// member path ... whose device holds no superblock of the array (blank
// ..., another array's, unreadable), is left out of the assembly when
// the superblocks present record it failed"; a blank one not in use is
// (TestReviewDmnFailedDiskSwappedForBlankStaysPending). One in use is
// not: heldByOther leaves out a held device only when it carries another
// array's superblock, so the EBUSY stands, openRetry waits 10 s for it
// (holding every start and READY=1), and the array stays pending for
// good, "in use": its surviving copy is not served. md's assembly by
// UUID skips the device and starts the array degraded.
//
// A file member held by another program (its flock) stands for the
// mounted disk.
func TestReviewstFailedSlotNowAnotherDiskInUse(t *testing.T) {
	paths := files(t, 2, 16<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	failAndStop(t, a, 1) // role 1 recorded faulty by role 0
	// Another disk, with no superblock of the array, now at the path, in
	// use by another program.
	if err := os.WriteFile(paths[1], make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	other, err := os.Open(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	fakeDevices(t)
	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(paths)}}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := m.Restore()
	if err != nil {
		t.Fatal(err)
	}
	s := m.arrays[0]
	if s != nil {
		t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	}
	if started != 1 || s == nil {
		t.Fatalf("restart with the failed member's path %s naming another device in use (no superblock of the array): %d started, %d failed; want the array started degraded on %s, as with a blank device not in use",
			paths[1], started, failed, paths[0])
	}
}
