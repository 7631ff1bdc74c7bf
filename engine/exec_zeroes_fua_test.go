package engine

import "testing"

// Found by review: a WRITE_ZEROES that carries FUA (ublk passes UBLK_IO_F_FUA for any
// op; md's raid1/raid10 keep REQ_FUA on the member bios of a write-zeroes)
// must be durable on every copy when it completes: each member either
// gets the write-zeroes as FUA, or a FLUSH after it returned and before
// the request is acknowledged.
func TestWriteZeroesFUADurable(t *testing.T) {
	for _, op := range []ReqOp{ReqWriteZeroes} {
		g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
		arr, _ := NewArray(g)
		be := &memBackend{done: map[uint16]error{}}
		for range 2 {
			be.members = append(be.members, &memMember{data: make([]byte, 64<<9), badRead: map[uint64]bool{}})
		}
		e := NewExecutor(arr, be, 1, 4096)
		e.Start(0, op, 0, 8, true, nil)
		durable := map[int32]bool{}
		zeroed := map[int32]bool{}
		for len(be.pending) > 0 {
			o := be.pending[0]
			be.pending = be.pending[1:]
			switch o.io.Kind {
			case IOWriteZeroes:
				zeroed[o.io.Member] = true
				if o.io.FUA {
					durable[o.io.Member] = true
				}
			case IOFlush:
				if zeroed[o.io.Member] {
					durable[o.io.Member] = true
				}
			}
			e.Done(o.tag, o.op, be.run(o))
		}
		err, done := be.done[0]
		if !done || err != nil {
			t.Fatalf("write-zeroes FUA: done=%v err=%v", done, err)
		}
		for m := int32(0); m < 2; m++ {
			if !durable[m] {
				t.Errorf("WRITE_ZEROES with FUA acknowledged while member %d's zeroes are only in its volatile cache (no FUA on its operation, no flush after it)", m)
			}
		}
	}
}
