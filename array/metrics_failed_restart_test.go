package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
)

// Found by review: a member failed and not removed stays failed across a
// stop and an assembly (the daemon's restart): its role is still faulty,
// `detail` still says "Failed Devices : 1" and the role still needs
// `remove`. After the assembly the failed role held no open device,
// Metrics skipped it as an empty slot, and ublkraid_disks{state="failed"}
// dropped to 0, disagreeing with detail. It is now counted there
// (ArrayStats.FailedSlots); with no device open, it has no member series.
func TestMetricsFailedMemberKeptAcrossAssembly(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	count := func(a *Array) int {
		st := a.Metrics("ublkb0")
		n := st.FailedSlots
		for _, m := range st.Members {
			if m.State == metrics.MemberFailed {
				n++
			}
		}
		return n
	}
	if s, n := a.Status(), count(a); s.FailedDisks != 1 || n != 1 {
		t.Fatalf("before the restart: detail Failed Devices %d, failed members in metrics %d", s.FailedDisks, n)
	}
	a.SetClean(true)
	a.Close()

	a, err = Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := a.Status()
	if s.Members[2].State != "faulty" {
		t.Fatalf("role 2 after the assembly: %+v (test assumes it is still faulty)", s.Members[2])
	}
	if n := count(a); n != s.FailedDisks {
		t.Fatalf("after the assembly: detail Failed Devices %d, role 2 %+v, but ublkraid_disks{state=\"failed\"} = %d", s.FailedDisks, s.Members[2], n)
	}
}
