package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A member operation given up at the member timeout fails its member: the
// member's metrics count it as an operation and an error, once, when it
// is given up; its late result, which the executor drops, counts again
// nowhere. (It counted nowhere at all: a member failed by a timeout showed
// no error.)
func TestMetricsTimeoutIsAnErrorOnce(t *testing.T) {
	for _, level := range []engine.Level{engine.Level1, engine.Level5} {
		paths := memberFiles(t, 3, 16<<20)
		if level == engine.Level1 {
			paths = paths[:2]
		}
		a, err := Open(paths, CreateSpec{Level: level, AssumeClean: true, NoBitmap: true}, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		a.MemberTimeout = 10 * time.Second
		r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
		h := a.newQueue(r)
		h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: 0, Sectors: 8, Buf: make([]byte, 4096)})
		if len(r.pending) != 1 {
			t.Fatalf("level %v: read planned as %+v", level, r.pending)
		}
		hung := r.pending[0]
		role := hung.io.Member
		r.pending = nil
		r.now = r.now.Add(11 * time.Second)
		h.OnTick()
		if s := a.Engine.State().Members[role].State; s != engine.MemberFaulty {
			t.Fatalf("level %v: role %d is %v after a read timed out", level, role, s)
		}
		check := func(when string) {
			t.Helper()
			rd := a.Metrics("ublkb0").Members[role].Ops[metrics.OpRead]
			if rd.Ops != 1 || rd.Errors != 1 {
				t.Errorf("level %v: role %d's read metrics %s: ops %d errors %d; want 1, 1", level, role, when, rd.Ops, rd.Errors)
			}
		}
		check("after the timeout")
		h.OnCompletion(hung.ud, 4096) // the late result
		check("after the late result")
	}
}
