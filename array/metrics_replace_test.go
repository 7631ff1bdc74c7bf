package array

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// The member series of a device that takes a role count that device's
// operations only: not those of the device it replaced (the counters were
// the role's, so a new disk was born with the failed one's errors), nor a
// late error of the old device's operation coming back after the replace
// (which made increase(ublkraid_member_errors_total) alert on the new,
// healthy disk).
func TestMetricsReplacedMemberStartsAfresh(t *testing.T) {
	for _, how := range []string{"failed before", "late error"} {
		t.Run(how, func(t *testing.T) {
			paths := memberFiles(t, 3, 16<<20)
			a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			a.MemberTimeout = 10 * time.Second
			var h *queue
			switch how {
			case "failed before":
				r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
				h = a.newQueue(r)
				h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 1024, Sectors: 8, Buf: make([]byte, 4096)})
				failRole0(h, r.pending)
				if s := a.Engine.State().Members[0].State; s != engine.MemberFaulty {
					t.Fatalf("role 0 is %v after a write error", s)
				}
				if e := a.Metrics("ublkb0").Members[0].Ops[metrics.OpWrite].Errors; e != 1 {
					t.Fatalf("the old device shows %d write errors, want 1", e)
				}
				replaceUnderQueue(t, a, h, 0, paths[2])
			default:
				var hung fakeOp
				h, _, hung = hungWrite(t, a)
				replaceUnderQueue(t, a, h, 0, paths[2])
				h.OnCompletion(hung.ud, -int32(unix.EIO)) // the old device's
			}
			waitActive(t, a, 0)
			st := a.Metrics("ublkb0")
			m := st.Members[0]
			if m.Name != paths[2] {
				t.Fatalf("role 0 is %s in the metrics, want %s: %+v", m.Name, paths[2], st.Members)
			}
			for op, s := range m.Ops {
				if s.Errors != 0 {
					t.Errorf("the new member %s shows %d %v errors it never had", m.Name, s.Errors, metrics.Op(op))
				}
			}
		})
	}
}
