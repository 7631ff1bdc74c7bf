package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (fix, f3ad4ea): at a restart, a listed device that now
// holds another array's superblock is left out when the freshest
// superblock records its role failed, so the array starts degraded, as
// md's assembly by UUID ignores another array's device. But the other
// array is most often one this daemon serves (the failed disk's slot
// reused: a new disk at the same path made a member of array B); its
// device is then held (O_EXCL for a block device, flock for a file) and
// the open fails with EBUSY, which is not "absent": the whole restart is
// refused and array A stays pending, or starts, depending only on
// whether B was started before it.
func TestReviewFixRestartOtherArraysHeldDeviceRefuses(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a := newRAID1(t, paths[:2])
	uuid := a.Status().UUID
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	stop(t, a)
	// The failed member's slot reused for array B, served (held).
	b, err := Open(paths[1:], CreateSpec{Name: "b", Level: engine.Level1, AssumeClean: true, Force: true, RegionSectors: testRegion}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A restart of A from its state file, which lists paths[0] and paths[1].
	a, err = Open(paths[:2], CreateSpec{SkipAbsent: true, AsRecorded: true, UUID: uuid}, false)
	if err != nil {
		t.Fatalf("restart of array %s, whose role 1 is recorded failed and whose listed role-1 path is now a member of array B (served): %v; with B not running the same restart starts A degraded, leaving that device out", uuid, err)
	}
	defer a.Close()
	if len(a.Absent) != 1 || a.Absent[0] != paths[1] {
		t.Fatalf("absent %v", a.Absent)
	}
}
