package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A member failing during a check of a raid1/10 array interrupts the
// check, as md's md_error interrupts any running sync (MD_RECOVERY_INTR),
// so that a spare starts rebuilding the role at once: the check used to
// run to its end (hours on a large array) while the array stayed
// degraded, the spare idle, and a second failure meanwhile lost data md
// would have kept.
func TestSpareDoesNotWaitForCheck(t *testing.T) {
	paths := memberFiles(t, 4, 32<<20)
	a, err := Open(paths[:3], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true,
		SyncMinBytes: 1 << 20, SyncMaxBytes: 1 << 20}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.AddSpare(paths[3]); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	if s := a.SyncStatus(); s.Action != "check" {
		t.Fatalf("no check running: %+v", s)
	}
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		st := a.Status()
		s := a.SyncStatus()
		if st.Members[2].Path == paths[3] && s.Action == "rebuild" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 s after a member failed during a check, the spare has not taken its role: role 2 %+v, sync %+v", st.Members[2], s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.StopSync()
}
