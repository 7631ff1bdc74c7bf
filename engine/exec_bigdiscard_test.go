package engine

import (
	"errors"
	"testing"
)

// Found by review. A DISCARD or WRITE_ZEROES is planned as one member
// operation per chunk piece and copy: with small chunks, one as large as
// the device used to advertise (1 GiB) had more than the 65536
// operations an OpID's 16-bit index tells apart. A result past the index
// was taken for another operation's (stale), and the request never
// ended. The device now advertises at most MaxPlanSectors, which must
// complete; a larger request must end too, with an error.
func TestExecutorLargeDiscardCompletes(t *testing.T) {
	g := Geometry{Level: Level10, Members: 2, Layout: LayoutN2, ChunkSectors: 8, MemberSectors: 1 << 19}
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	be := &memBackend{done: map[uint16]error{}} // no member data: results are delivered as such
	e := NewExecutor(arr, be, 1, 4096)
	run := func(op ReqOp, at uint64, sectors uint32) (error, bool) {
		e.Start(0, op, at, sectors, false, nil)
		for len(be.pending) > 0 {
			o := be.pending[0]
			be.pending = be.pending[1:]
			e.Done(o.tag, o.op, 0)
		}
		err, ok := be.done[0]
		delete(be.done, 0)
		return err, ok
	}
	most := uint32(g.MaxPlanSectors())
	for _, c := range []struct {
		op   ReqOp
		name string
	}{{ReqDiscard, "discard"}, {ReqWriteZeroes, "write-zeroes"}} {
		// The largest the device takes, starting mid-chunk (one piece
		// more).
		for _, at := range []uint64{0, 4} {
			if err, ok := run(c.op, at, most); !ok || err != nil {
				t.Fatalf("%s of %d sectors at %d: completed %v, %v (%d results taken as stale)", c.name, most, at, ok, err, len(be.stale))
			}
		}
		err, ok := run(c.op, 0, 1<<19)
		if !ok || !errors.Is(err, errUnsupported) {
			t.Fatalf("%s of %d sectors: completed %v, %v; want an error (%d results taken as stale)", c.name, 1<<19, ok, err, len(be.stale))
		}
	}
}
