package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
	"golang.org/x/sys/unix"
)

// Found by review. A request the array does not serve (an operation it does not know) is
// refused with EOPNOTSUPP at once; it is no longer in flight afterwards,
// like any completed request: the queue's in-flight count goes back to 0.
func TestMetricsInFlightRefusedOp(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := &fakeRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWriteSame, Sector: 0, Sectors: 8, Buf: make([]byte, 4096)})
	if err, ok := r.done[0]; !ok || err != unix.EOPNOTSUPP {
		t.Fatalf("unknown op: done %v, err %v (want EOPNOTSUPP)", ok, err)
	}
	for _, q := range a.Metrics("ublkb0").Queues {
		if q.InFlight != 0 {
			t.Errorf("queue %d: %d requests in flight after the only one completed", q.ID, q.InFlight)
		}
	}
}
