package array

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A raid5 member whose reads keep failing is failed once more than
// maxParityReadErrors of them failed in a row (md's raid5: more than its
// stripe cache's size); a read of it that succeeds starts the count
// again; the member whose loss would lose data is never failed for it
// (its reads fail then). Every other read meanwhile returns the data.
func TestParityReadErrorBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		degraded bool // another member failed first: mem is needed
		okAfter  int  // a read of mem that succeeds after this many errors
		errors   int
		failed   bool
	}{
		{name: "in-a-row", errors: maxParityReadErrors + 20, failed: true},
		{name: "within-budget", errors: maxParityReadErrors - 20},
		{name: "reset-by-success", okAfter: maxParityReadErrors - 20, errors: maxParityReadErrors + 20},
		{name: "last-copy", degraded: true, errors: maxParityReadErrors + 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(11))
			const span = 1024
			a, h, r, ref, _ := writtenParityArray(t, rng, engine.Level5, 4, 6, span)
			g := *a.Engine.Parity
			_, _, mem, msec := g.LocateData(40)
			if tc.degraded {
				other := (mem + 1) % g.Members
				if err := a.Fail(other); err != nil {
					t.Fatal(err)
				}
			}
			failing := true
			r.failOn = func(io engine.MemberIO) bool {
				return failing && io.Kind == engine.IORead && int(io.Member) == mem && io.Sector < msec+8 && io.Sector+uint64(io.Sectors) > msec
			}
			read := func(i int) {
				t.Helper()
				buf := pageBuf(8 << 9)
				delete(r.done, 0)
				h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: 40, Sectors: 8, Buf: buf})
				pServe(t, rng, h, r, []uint16{0})
				if err := r.done[0]; tc.degraded && i >= 0 {
					// (mem holds the last copy of its rows: the read
					// fails, as md's)
					if err == nil {
						t.Fatalf("read %d of a lost chunk succeeded", i)
					}
				} else if err != nil || !bytes.Equal(buf, ref[40<<9:48<<9]) {
					t.Fatalf("read %d: %v, data right %v", i, err, err == nil && bytes.Equal(buf, ref[40<<9:48<<9]))
				}
				// (Each failed read's repair done before the next, as
				// when they are spread out: none dropped.)
				deadline := time.Now().Add(10 * time.Second)
				for len(a.repairs) > 0 && time.Now().Before(deadline) {
					time.Sleep(100 * time.Microsecond)
				}
			}
			for i := range tc.errors {
				if tc.okAfter > 0 && i == tc.okAfter {
					failing = false
					read(-1)
					failing = true
				}
				read(i)
			}
			deadline := time.Now().Add(10 * time.Second)
			for tc.failed && a.Engine.State().Members[mem].State == engine.MemberActive && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			s := a.Engine.State().Members[mem].State
			if tc.failed != (s == engine.MemberFaulty) {
				t.Fatalf("after %d read errors: member %d is %v", tc.errors, mem, s)
			}
			failing = false
			if tc.degraded {
				read(-1)
				return
			}
			pReadAll(t, rng, h, r, ref, span)
		})
	}
}
