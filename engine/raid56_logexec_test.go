package engine

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// With the write-hole log, every write of a parity array logs each
// segment whose parity it writes before any of its data and parity
// writes is issued (FUA), and those then go FUA; each entry's payload
// is what recovery needs: once the write is done, replaying its entry
// over the data on disk gives the parity on disk. Writes of any shape
// (RMW, RCW, full stripes, degraded), on rings small enough to fill
// (the writes then wait for a checkpoint).
func TestRaid56ExecutorWritesLog(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := drawParityGeo(t)
		queues := rapid.IntRange(1, 2).Draw(t, "queues")
		const maxSectors = 48
		w := newPWorld(t, g, queues, 2, maxSectors<<9)
		per := g.ParityLogBytesPerRequest(maxSectors << 9)
		ringBytes := uint64(per) * uint64(rapid.IntRange(1, 3).Draw(t, "writes per ring"))
		w.enableLog(t, ParityLogHeaderSize+uint64(queues)*((ringBytes+4095)&^4095), maxSectors<<9)
		w.fillConsistent(t)
		lost := -1
		if rapid.Bool().Draw(t, "degraded") {
			// Failed, or rebuilding (written, not to be read back by a
			// recovery: in X too).
			lost = rapid.IntRange(0, g.Members-1).Draw(t, "lost")
			st := MemberStatus{State: MemberFaulty}
			if rapid.Bool().Draw(t, "rebuilding") {
				st = MemberStatus{State: MemberRebuilding, RebuildOffset: rapid.Uint64Range(0, g.MemberSectors).Draw(t, "rebuild offset")}
			}
			w.arr.Update(func(ms []MemberStatus) { ms[lost] = st })
			w.durable, w.asked = w.arr.State().Gen, w.arr.State().Gen
			for _, e := range w.execs {
				e.Persisted(w.durable)
			}
			w.members[lost].dead = st.State == MemberFaulty
		}
		// Per queue and tag: its log writes not yet done, and the
		// entries it wrote.
		type key struct {
			q   int
			tag uint16
		}
		var entries []ParityLogEntry
		var fail string
		w.logHook = func(o pOp) {
			e, err := DecodeParityLogEntry(o.data, g, plogUUID)
			if err != nil {
				fail = fmt.Sprintf("entry written by queue %d tag %d: %v", o.q, o.tag, err)
				return
			}
			e.P, e.Q = bytes.Clone(e.P), bytes.Clone(e.Q)
			entries = append(entries, e)
		}
		size := g.ArraySectors()
		var seq uint64
		for range rapid.IntRange(1, 12).Draw(t, "writes") {
			sector := rapid.Uint64Range(0, size-1).Draw(t, "sector")
			n := rapid.Uint64Range(1, min(maxSectors, size-sector)).Draw(t, "sectors")
			q := rapid.IntRange(0, queues-1).Draw(t, "queue")
			seq++
			buf := make([]byte, n<<9)
			fill(buf, seq)
			entries = entries[:0]
			w.execs[q].Start(0, ReqWrite, sector, uint32(n), false, buf)
			for len(w.pending) > 0 || w.logAsked {
				if len(w.pending) == 0 {
					w.settle() // (a checkpoint asked for)
					continue
				}
				logging := map[key]bool{}
				for _, o := range w.pending {
					if o.io.Log {
						logging[key{o.q, o.tag}] = true
					}
				}
				for _, o := range w.pending {
					if o.io.Log || o.io.Kind != IOWrite {
						continue
					}
					if logging[key{o.q, o.tag}] {
						t.Fatalf("a data or parity write of queue %d tag %d issued before its log writes were done", o.q, o.tag)
					}
					if !o.io.FUA {
						t.Fatalf("a data or parity write without FUA: %+v", o.io)
					}
				}
				w.deliver(0)
			}
			w.settle()
			if fail != "" {
				t.Fatal(fail)
			}
			if err, ok := w.done[q][0]; !ok || err != nil {
				t.Fatalf("write %d+%d: done %v, %v", sector, n, ok, err)
			}
			delete(w.done[q], 0)
			if len(entries) == 0 && lost < 0 {
				t.Fatalf("write %d+%d logged nothing", sector, n)
			}
			for _, e := range entries {
				w.checkEntry(t, e, lost)
			}
		}
	})
}

// checkEntry replays entry e over the data on the members (lost: a
// member whose data is stale) and compares with the parity on them.
func (w *pWorld) checkEntry(t *rapid.T, e ParityLogEntry, lost int) {
	g := w.g
	sm := g.Stripe(e.Stripe)
	n := int(e.RowHi-e.RowLo) << 9
	off := (e.Stripe*g.ChunkSectors + e.RowLo) << 9
	nd := g.DataMembers()
	data := make([][]byte, nd)
	for m := range g.Members {
		slot := sm.Slot[m]
		if slot < 0 || e.Logged&(1<<uint(slot)) != 0 {
			continue
		}
		if m == lost && !w.arr.State().Members[m].readable((e.Stripe+1)*g.ChunkSectors) {
			t.Fatalf("entry %d of stripe %d: lost member %d's slot %d not logged (logged %#x)", e.Seq, e.Stripe, m, slot, e.Logged)
		}
		data[slot] = w.members[m].data[off : off+uint64(n)]
	}
	// X is the slots not written and the written ones of members that
	// cannot be read at the stripe; a written slot of a member that can
	// (rebuilt past the stripe) is not: a recovery reads it as the crash
	// left it.
	st := w.arr.State()
	for m := range g.Members {
		slot := sm.Slot[m]
		if slot < 0 {
			continue
		}
		written, inX := e.Written&(1<<uint(slot)) != 0, e.Logged&(1<<uint(slot)) != 0
		if want := !written || !st.Members[m].readable((e.Stripe+1)*g.ChunkSectors); inX != want {
			t.Fatalf("entry %d of stripe %d: member %d (%+v, written %v) in X %v, want %v", e.Seq, e.Stripe, m, st.Members[m], written, inX, want)
		}
	}
	par, err := NewParity(nd, g.Level == Level6)
	if err != nil {
		t.Fatal(err)
	}
	out := [][]byte{make([]byte, n), make([]byte, n)}[:e.Parity]
	if err := par.RecoverParity([][]byte{e.P, e.Q}[:e.Parity], data, e.Logged, out); err != nil {
		t.Fatal(err)
	}
	for k, pm := range []int{sm.P, sm.Q}[:e.Parity] {
		if pm == lost {
			continue
		}
		if !bytes.Equal(out[k], w.members[pm].data[off:off+uint64(n)]) {
			t.Fatalf("entry %d (stripe %d rows %d-%d, logged %#x, written %#x): replayed parity %d differs from the parity the write left", e.Seq, e.Stripe, e.RowLo, e.RowHi, e.Logged, e.Written, k)
		}
	}
}

// fillConsistent gives every stripe data of its own and the parity of it,
// so that an RMW's old data and parity matter.
func (w *pWorld) fillConsistent(t fataler) {
	g := w.g
	nd := g.DataMembers()
	par, err := NewParity(nd, g.Level == Level6)
	if err != nil {
		t.Fatal(err)
	}
	n := g.ChunkSectors << 9
	for st := range g.Stripes() {
		sm := g.Stripe(st)
		off := st * n
		data := make([][]byte, nd)
		for m := range g.Members {
			if slot := sm.Slot[m]; slot >= 0 {
				data[slot] = w.members[m].data[off : off+n]
				fill(data[slot], 1000+st*64+uint64(m))
			}
		}
		pq := [][]byte{w.members[sm.P].data[off : off+n], nil}[:par.Count()]
		if sm.Q >= 0 {
			pq[1] = w.members[sm.Q].data[off : off+n]
		}
		if err := par.Compute(data, pq); err != nil {
			t.Fatal(err)
		}
	}
}

// A write waiting for ring space on one queue is woken when another
// queue's write, holding the oldest entry, ends: the checkpoint moves
// then, and that queue must ask for it (it used to ask only for its own
// waiters, leaving the other queue to the checkpointer's timer).
func TestRaid56ExecutorLogWaitAcrossQueues(t *testing.T) {
	g := raid56Geo(Level5, 4)
	g.MemberSectors = 256
	const maxBytes = 4 << 10
	w := newPWorld(t, g, 2, 2, maxBytes)
	per := uint64(g.ParityLogBytesPerRequest(maxBytes))
	w.enableLog(t, ParityLogHeaderSize+2*((per+4095)&^4095), maxBytes)
	w.logHook = func(pOp) {}
	buf := func(id uint64) []byte { b := make([]byte, 8<<9); fill(b, id); return b }
	// Queue 1's write takes its entry and is held before its data writes.
	w.execs[1].Start(0, ReqWrite, 0, 8, false, buf(1))
	for len(w.pending) > 0 && !(w.pending[0].q == 1 && !w.pending[0].io.Log && w.pending[0].io.Kind == IOWrite) {
		w.deliver(0)
	}
	held := w.pending
	w.pending = nil
	// Queue 0: writes that end, until its full ring parks one (their
	// entries cannot be freed: queue 1 holds an older one).
	parked := -1
	for i := range 40 {
		tag := uint16(i % 2)
		w.execs[0].Start(tag, ReqWrite, uint64(64+8*(i%16)), 8, false, buf(uint64(10+i)))
		w.settle()
		if _, ok := w.done[0][tag]; !ok {
			parked = i
			break
		}
		delete(w.done[0], tag)
	}
	if parked < 0 {
		t.Fatal("queue 0's ring never filled")
	}
	if n := w.execs[0].Stats.LogWaits.Load(); n != 1 {
		t.Fatalf("queue 0's Stats.LogWaits = %d, want 1 (one write parked)", n)
	}
	// Queue 1's write ends: the checkpoint passes queue 0's first entry.
	w.pending = held
	w.settle()
	if err, ok := w.done[1][0]; !ok || err != nil {
		t.Fatalf("queue 1's write: %v %v", ok, err)
	}
	if err, ok := w.done[0][uint16(parked%2)]; !ok || err != nil {
		t.Fatalf("queue 0's waiting write was not woken when the checkpoint moved: done %v %v", ok, err)
	}
}
