package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
)

// A check reads every copy: metrics.MemberStats.Ops counts "every
// operation the engine issued to the member ..., including those of
// resync, recovery and check", so each member's read counters must show
// the check's reads.
func TestMetricsCountSyncIO(t *testing.T) {
	_, a := openRaid1(t)
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if y := a.SyncStatus(); y.LastCheckResult != "ok" {
		t.Fatalf("check: %+v", y)
	}
	size := a.Engine.ArraySectors() << 9
	for _, m := range a.Metrics("ublkb0").Members {
		rd := m.Ops[metrics.OpRead]
		if rd.Ops == 0 || rd.Bytes < size {
			t.Errorf("member %s after a check of %d bytes: read ops %d, bytes %d", m.Name, size, rd.Ops, rd.Bytes)
		}
	}
}

// Bitmap block writes count as the member's writes too (MemberStats.Ops).
func TestMetricsCountBitmapWrites(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil { // recorded in the bitmap header too
		t.Fatal(err)
	}
	st := a.Metrics("ublkb0")
	if st.Bitmap == nil || st.Bitmap.BlockWrites == 0 {
		t.Fatalf("bitmap metrics %+v: no block write counted", st.Bitmap)
	}
	if w := st.Members[0].Ops[metrics.OpWrite]; w.Ops == 0 || w.Bytes == 0 {
		t.Fatalf("member %s: %d bitmap block writes, member writes %+v", st.Members[0].Name, st.Bitmap.BlockWrites, w)
	}
}
