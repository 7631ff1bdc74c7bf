package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review: md's mismatch_cnt belongs to the check or repair in
// progress (zeroed when one starts, counting up as it finds differences).
// Here it stayed at the previous job's figure until the new one ended:
// after a repair fixed 3 blocks, a check that found 2 others showed 24
// sectors (the repair's) for its whole run, and an alert on it kept
// firing over a repaired array.
func TestMismatchCountBelongsToRunningCheck(t *testing.T) {
	paths := memberFiles(t, 2, 4<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true,
		SyncMinBytes: 1 << 20, SyncMaxBytes: 1 << 20}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	scribble(t, a, paths[1], 0, 3*4096, 0x55) // 3 blocks differ, at the start
	if err := a.Check(true); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if y := a.SyncStatus(); y.MismatchCnt != 24 {
		t.Fatalf("repair: %+v, want mismatch_cnt 24", y)
	}
	scribble(t, a, paths[1], 8192, 2*4096, 0x66) // 2 blocks differ now
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	// (Throttled to 1 MiB/s: the 4 MiB check runs for seconds after its
	// first 1 MiB step.)
	var y SyncStatus
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		y = a.SyncStatus()
		if y.Action == "check" && y.Done >= 1<<20 {
			break
		}
		if y.Action != "check" && y.LastCheck == "check" || time.Now().After(deadline) {
			t.Fatalf("never saw the check running past its first step: %+v", y)
		}
	}
	m := a.Metrics("ublkb0")
	a.StopSync()
	if y.MismatchCnt != 16 || m.MismatchSectors != 16 {
		t.Fatalf("check running at %d of %d bytes: mismatch_cnt %d, ublkraid_mismatch_sectors %d, want 16 (what this check found so far; md zeroes it at the start)",
			y.Done, y.Total, y.MismatchCnt, m.MismatchSectors)
	}
}
