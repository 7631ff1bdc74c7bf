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

// A write whose pre-read of a data chunk it does not write fails with a
// read error, in a stripe whose parity is untrusted (a region never
// written, or not resynced since), cannot read around that member as
// read repair would: the chunk rebuilt from that parity is anything but
// what the member holds, the new parity is computed over the rebuilt
// chunk, and the member, kept, holds other rows until read repair
// rewrites them later, outside the stripe lock (or never: a crash
// first). Meanwhile a rebuild (or a degraded read) of the chunk the write
// wrote takes it from that mismatch: the acknowledged write is lost (the
// array model's raid6 failure: a spare's rebuild wrote garbage over it).
// The member fails instead, as it does without read repair. Checked:
// every chunk the write wrote is what the members still in the array
// rebuild there without it.
func TestRaid56ExecutorReadErrorUntrustedParity(t *testing.T) {
	for _, level := range []Level{Level5, Level6} {
		g := raid56Geo(level, 5)
		w := newPWorld(t, g, 1, 1, 64<<10)
		w.execs[0].ReadRepair = func(int, uint64, uint32) {}
		w.execs[0].Untrusted = func(uint64) bool { return true }
		// What the devices held before the array: different on each, so
		// the parity is of nothing.
		for i, m := range w.members {
			for j := range m.data {
				m.data[j] = byte(i*37+1) ^ byte(j>>9) ^ byte(j*7)
			}
		}
		// Rows 1-6 of stripe 0's data chunk 1: RCW (the parity is not
		// trusted) pre-reads the other data chunks; chunk 0's fail.
		_, _, bad, _ := g.LocateData(0)
		_, _, wm, _ := g.LocateData(g.ChunkSectors)
		w.failHook = func(o pOp) bool { return o.io.Kind == IORead && int(o.io.Member) == bad }
		buf := make([]byte, 6<<9)
		fill(buf, 9)
		if err := w.do(t, 0, ReqWrite, g.ChunkSectors+1, 6, buf); err != nil {
			t.Fatalf("%v: write: %v", level, err)
		}
		w.failHook = nil
		if got := make([]byte, 6<<9); w.do(t, 0, ReqRead, g.ChunkSectors+1, 6, got) != nil || !bytes.Equal(got, buf) {
			t.Fatalf("%v: the write does not read back", level)
		}
		// Rebuild member wm's rows 1-6 of stripe 0 from the members in
		// the array but wm (as a rebuild of a device put in its role, or
		// a read with wm lost, would).
		par, err := NewParity(g.DataMembers(), level == Level6)
		if err != nil {
			t.Fatal(err)
		}
		m := g.Stripe(0)
		shards := make([][]byte, g.DataMembers()+par.Count())
		missing := 0
		for mem, ms := range w.arr.State().Members {
			k := int(m.Slot[mem])
			switch mem {
			case m.P:
				k = g.DataMembers()
			case m.Q:
				k = g.DataMembers() + 1
			}
			if mem == wm || ms.State != MemberActive {
				missing++
				continue
			}
			shards[k] = append([]byte(nil), w.members[mem].data[1<<9:7<<9]...)
		}
		if missing > par.Count() {
			// (raid5 with the bad member failed: nothing left to rebuild
			// wm from; the array cannot lose it.)
			continue
		}
		if err := par.Reconstruct(shards); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(shards[m.Slot[wm]], buf) {
			t.Errorf("%v: member %d's rows written (a read error on member %d, %v) rebuild from the others as other data: the write is lost",
				level, wm, bad, w.arr.State().Members[bad].State)
		}
	}
}
