package engine

import (
	"bytes"
	"testing"
)

// With ReadRepair set, a read error is a bad sector, not a dead member
// (md's raid5 read error path): the request reads around the member, its
// chunk reconstructed, the member stays in, and ReadRepair is told of the
// member rows to rewrite. A timeout still fails the member (Tick: not
// here). Reads and writes (whose pre-read fails) both.
func TestRaid56ExecutorReadErrorRepaired(t *testing.T) {
	type rep struct {
		member  int
		sector  uint64
		sectors uint32
	}
	for _, level := range []Level{Level5, Level6} {
		for _, op := range []ReqOp{ReqRead, ReqWrite} {
			g := raid56Geo(level, 5)
			w := newPWorld(t, g, 1, 1, 64<<10)
			var reps []rep
			w.execs[0].ReadRepair = func(member int, sector uint64, sectors uint32) {
				reps = append(reps, rep{member, sector, sectors})
			}
			n := uint32(g.ArraySectors())
			data := make([]byte, n<<9)
			fill(data, 4)
			if err := w.do(t, 0, ReqWrite, 0, n, data); err != nil {
				t.Fatal(err)
			}
			// Array sectors 9..14: within the chunk (8 sectors) of data
			// member mem, stripe 0.
			_, _, mem, msec := g.LocateData(9)
			w.failHook = func(o pOp) bool { return o.io.Kind == IORead && int(o.io.Member) == mem }
			switch op {
			case ReqRead:
				got := make([]byte, 6<<9)
				if err := w.do(t, 0, ReqRead, 9, 6, got); err != nil || !bytes.Equal(got, data[9<<9:15<<9]) {
					t.Fatalf("%v: read with a read error: %v, data right %v", level, err, bytes.Equal(got, data[9<<9:15<<9]))
				}
			case ReqWrite:
				// A write of stripe 0's data chunks after mem's (chunk
				// 1): fewer pre-reads by RCW (chunks 0 and 1) than by
				// RMW (those chunks and the parity), so it pre-reads
				// mem's rows, which fail.
				nd := uint64(g.DataMembers())
				w2 := make([]byte, (nd-2)*g.ChunkSectors<<9)
				fill(w2, 5)
				if err := w.do(t, 0, ReqWrite, 2*g.ChunkSectors, uint32(len(w2)>>9), w2); err != nil {
					t.Fatalf("%v: write beside a bad sector: %v", level, err)
				}
				copy(data[2*g.ChunkSectors<<9:], w2)
				if len(reps) == 0 {
					t.Fatalf("%v: no write pre-read mem's rows", level)
				}
			}
			w.failHook = nil
			if s := w.arr.State().Members[mem].State; s != MemberActive {
				t.Fatalf("%v %v: member %d with a read error is %v, want it kept (read repair)", level, op, mem, s)
			}
			if op == ReqRead && len(reps) == 0 {
				t.Fatalf("%v: no read repair asked", level)
			}
			for _, r := range reps {
				if r.member != mem {
					t.Fatalf("%v %v: repair of member %d, the read failed on %d", level, op, r.member, mem)
				}
				if op == ReqRead && (r.sector > msec || r.sector+uint64(r.sectors) < msec+6) {
					t.Fatalf("%v: repair of %d+%d does not cover the rows read (%d+6)", level, r.sector, r.sectors, msec)
				}
			}
			w.parityConsistent(t)
			got := make([]byte, n<<9)
			if err := w.do(t, 0, ReqRead, 0, n, got); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%v %v: read back: %v, data right %v", level, op, err, bytes.Equal(got, data))
			}
		}
	}
}

// Without ReadRepair, a read error fails the member, as before (and the
// read is answered from the others).
func TestRaid56ExecutorReadErrorWithoutRepairFails(t *testing.T) {
	g := raid56Geo(Level5, 4)
	w := newPWorld(t, g, 1, 1, 64<<10)
	_, _, mem, _ := g.LocateData(0)
	w.failHook = func(o pOp) bool { return o.io.Kind == IORead && int(o.io.Member) == mem }
	got := make([]byte, 8<<9)
	if err := w.do(t, 0, ReqRead, 0, 8, got); err != nil {
		t.Fatal(err)
	}
	if s := w.arr.State().Members[mem].State; s != MemberFaulty {
		t.Fatalf("member %d is %v, want faulty", mem, s)
	}
}
