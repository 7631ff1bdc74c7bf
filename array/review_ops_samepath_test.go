package array

import (
	"os"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review (ops): the everyday disk swap. A member fails, is
// removed, the dead disk is pulled and a new one appears at the same path
// (/dev/sdb again), and `replace` puts it into the role. The new disk's
// member series must start from zero, as TestMetricsReplacedMemberStartsAfresh
// requires for a replacement under another name: it never had an error.
func TestReviewopsNewDiskAtSamePathStartsAfresh(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 10 * time.Second
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 1024, Sectors: 8, Buf: make([]byte, 4096)})
	failRole0(h, r.pending)
	r.pending = nil
	if s := a.Engine.State().Members[0].State; s != engine.MemberFaulty {
		t.Fatalf("role 0 is %v after a write error", s)
	}
	if e := a.Metrics("ublkb0").Members[0].Ops[metrics.OpWrite].Errors; e != 1 {
		t.Fatalf("the old device shows %d write errors, want 1", e)
	}
	underQueue(t, h, func() error { return a.Remove(0) })
	// The dead disk is pulled; a new, blank one appears under its name.
	if err := os.Remove(paths[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[0], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(paths[0], 16<<20); err != nil {
		t.Fatal(err)
	}
	replaceUnderQueue(t, a, h, 0, paths[0])
	waitActive(t, a, 0)
	st := a.Metrics("ublkb0")
	for _, m := range st.Members {
		if m.Name != paths[0] {
			continue
		}
		for op, s := range m.Ops {
			if s.Errors != 0 {
				t.Errorf("the new disk at %s shows %d %v errors it never had (the removed disk's)", m.Name, s.Errors, metrics.Op(op))
			}
		}
	}
}
