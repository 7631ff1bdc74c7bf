package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A short write (fewer bytes than asked: a file member cut short, say)
// fails its member as an error does; the member's metrics must count it
// as an error, not as a write of every byte asked.
func TestMetricsShortWriteIsAnError(t *testing.T) {
	_, a := openRaid1(t)
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 1024, Sectors: 8, Buf: make([]byte, 4096)})
	for _, o := range r.pending {
		if o.io.Member == 0 {
			h.OnCompletion(o.ud, 2048)
		} else {
			h.OnCompletion(o.ud, 4096)
		}
	}
	if s := a.Engine.State().Members[0].State; s != engine.MemberFaulty {
		t.Fatalf("role 0 is %v after a short write", s)
	}
	w := a.Metrics("ublkb0").Members[0].Ops[metrics.OpWrite]
	if w.Ops != 1 || w.Errors != 1 || w.Bytes != 0 {
		t.Fatalf("role 0's write metrics after a short write: ops %d errors %d bytes %d; want 1, 1, 0", w.Ops, w.Errors, w.Bytes)
	}
}
