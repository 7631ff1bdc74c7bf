package engine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// healWorld: a degraded raid5 (member lost failed), log on, every stripe
// written with known data (ref).
func healWorld(t *testing.T, g ParityGeometry, depth int, lost int) (*pWorld, []byte) {
	const maxSectors = 64
	w := newPWorld(t, g, 1, depth, maxSectors<<9)
	per := g.ParityLogBytesPerRequest(maxSectors << 9)
	w.enableLog(t, ParityLogHeaderSize+uint64(per*4+4095)&^4095, maxSectors<<9)
	w.logHook = func(pOp) {}
	n := uint32(g.ArraySectors())
	ref := make([]byte, n<<9)
	fill(ref, 77)
	for s := uint32(0); s < n; s += maxSectors {
		k := min(maxSectors, n-s)
		if err := w.do(t, 0, ReqWrite, uint64(s), k, bytes.Clone(ref[s<<9:(s+k)<<9])); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []int{lost} {
		w.arr.Fail(l)
		w.members[l].dead = true
	}
	w.asked = w.arr.State().Gen
	w.persist()
	return w, ref
}

// dataSector is the array sector of member mem's chunk in stripe s.
func dataSector(g ParityGeometry, s uint64, mem int) uint64 {
	m := g.Stripe(s)
	nd := uint64(g.DataMembers())
	for d := range nd {
		if int(m.Data[d]) == mem {
			return (s*nd + d) * g.ChunkSectors
		}
	}
	panic("not data")
}

// Two writes of one queue, on different stripes, both failing their data
// write on the kept member x: their heals read back x's rows at the same
// offsets of their heal buffers (each relative to its own request). With
// completions reaped in a batch (io_uring: the data has landed before the
// queue thread sees either CQE), a buffer shared by the executor's tags
// (as first written) made one heal compute its parity from the other
// stripe's rows, write it and count it healed: the lost member's chunk
// then read as garbage.
func TestHealConcurrentHealsOwnBuffers(t *testing.T) {
	for _, serial := range []bool{true, false} {
		t.Run(map[bool]string{true: "serial", false: "batch"}[serial], func(t *testing.T) { concurrentHeals(t, serial) })
	}
}

func concurrentHeals(t *testing.T, serial bool) {
	g := ParityGeometry{Level: Level5, Members: 4, Layout: LeftSymmetric, ChunkSectors: 8, MemberSectors: 64}
	const lost, x = 3, 1
	w, ref := healWorld(t, g, 2, lost)
	var stripes []uint64
	for s := range g.Stripes() {
		m := g.Stripe(s)
		if m.P != lost && m.P != x {
			stripes = append(stripes, s)
		}
	}
	if len(stripes) < 2 {
		t.Fatal("geometry")
	}
	e := w.execs[0]
	w.failHook = func(o pOp) bool { return o.io.Kind == IOWrite && !o.io.Log && int(o.io.Member) == x }
	bufs := [][]byte{make([]byte, 8<<9), make([]byte, 8<<9)}
	for tag := range 2 {
		fill(bufs[tag], uint64(500+tag))
		e.Start(uint16(tag), ReqWrite, dataSector(g, stripes[tag], x), 8, false, bufs[tag])
	}
	isHealRead := func(o pOp) bool { return o.io.Kind == IORead && e.inHealBuf(o.data) }
	for {
		i := -1
		for k, o := range w.pending {
			if !isHealRead(o) {
				i = k
				break
			}
		}
		if i >= 0 {
			w.deliver(i)
			continue
		}
		if len(w.pending) > 0 && serial {
			w.deliver(0)
			continue
		}
		if len(w.pending) > 0 {
			// A batch of completions: every read lands, then the thread
			// reaps them.
			ops := append([]pOp(nil), w.pending...)
			w.pending = w.pending[:0]
			res := make([]int32, len(ops))
			for k, o := range ops {
				res[k] = w.run(o)
			}
			for k, o := range ops {
				e.Done(o.tag, o.op, res[k])
			}
			continue
		}
		if w.asked > w.durable {
			w.persist()
			continue
		}
		break
	}
	w.failHook = nil
	for tag := range 2 {
		err, ok := w.done[0][uint16(tag)]
		if !ok || !errors.Is(err, ErrLastCopy) || errors.Is(err, ErrStripeUnhealed) {
			t.Fatalf("tag %d: done %v err %v, want ErrLastCopy, healed", tag, ok, err)
		}
		delete(w.done[0], uint16(tag))
	}
	if e.Stats.Healed.Load() != 2 {
		t.Fatalf("healed %d", e.Stats.Healed.Load())
	}
	for _, s := range stripes[:2] {
		l := dataSector(g, s, lost)
		got := make([]byte, g.ChunkSectors<<9)
		if err := w.do(t, 0, ReqRead, l, uint32(g.ChunkSectors), got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, ref[l<<9:(l+g.ChunkSectors)<<9]) {
			t.Errorf("stripe %d: the lost member's chunk, counted healed, reads other data than was written to it", s)
		}
	}
}

// A heal's read back that fails with an error (ReadRepair set) is handed
// to ReadRepair at the end of the heal's read phase, and again at the end
// of its write phase: failMembers runs over every failed operation of the
// request at each phase's end.
func TestHealReadErrorRepairedOnce(t *testing.T) {
	g := ParityGeometry{Level: Level5, Members: 4, Layout: LeftSymmetric, ChunkSectors: 8, MemberSectors: 64}
	const lost, x = 3, 1
	w, _ := healWorld(t, g, 1, lost)
	var s uint64
	for ; ; s++ {
		if m := g.Stripe(s); m.P != lost && m.P != x {
			break
		}
	}
	e := w.execs[0]
	var repairs []string
	e.ReadRepair = func(member int, sector uint64, sectors uint32) {
		repairs = append(repairs, fmt.Sprintf("member %d %d+%d", member, sector, sectors))
	}
	w.failHook = func(o pOp) bool {
		return int(o.io.Member) == x && !o.io.Log && (o.io.Kind == IOWrite || e.inHealBuf(o.data))
	}
	buf := make([]byte, 8<<9)
	fill(buf, 9)
	err := w.do(t, 0, ReqWrite, dataSector(g, s, x), 8, buf)
	if !errors.Is(err, ErrStripeUnhealed) {
		t.Fatalf("%v", err)
	}
	if len(repairs) != 1 {
		t.Fatalf("ReadRepair called %d times for one failed read back: %v", len(repairs), repairs)
	}
}

// Property: a degraded raid5/6 (as many members lost as the parity
// covers, some maybe rebuilding), log on; writes whose non-log writes fail
// on drawn members (kept, or failed when redundant). After each: a write
// counted healed (ErrLastCopy, not ErrStripeUnhealed) leaves every sector
// it did not write reading as before, and those it wrote reading old or
// new.
var healCov = map[string]int{}

func TestHealProperty(t *testing.T) {
	defer func() { t.Log(healCov) }()
	rapid.Check(t, func(t *rapid.T) {
		g := drawParityGeo(t)
		const maxSectors = 48
		w := newPWorld(t, g, 1, 1, maxSectors<<9)
		per := g.ParityLogBytesPerRequest(maxSectors << 9)
		w.enableLog(t, ParityLogHeaderSize+uint64(per*3+4095)&^4095, maxSectors<<9)
		w.logHook = func(pOp) {}
		n := uint32(g.ArraySectors())
		ref := make([]byte, n<<9)
		fill(ref, 3)
		for s := uint32(0); s < n; s += maxSectors {
			k := min(maxSectors, n-s)
			if err := w.do(t, 0, ReqWrite, uint64(s), k, bytes.Clone(ref[s<<9:(s+k)<<9])); err != nil {
				t.Fatal(err)
			}
		}
		nLost := rapid.IntRange(1, g.ParityMembers()).Draw(t, "lost")
		perm := rapid.Permutation(func() []int {
			p := make([]int, g.Members)
			for i := range p {
				p[i] = i
			}
			return p
		}()).Draw(t, "perm")
		for _, l := range perm[:nLost] {
			st := MemberStatus{State: MemberFaulty}
			if rapid.Bool().Draw(t, "rebuilding") {
				st = MemberStatus{State: MemberRebuilding, RebuildOffset: rapid.Uint64Range(0, g.MemberSectors).Draw(t, "offset")}
				fill(w.members[l].data[st.RebuildOffset<<9:], 99) // garbage above it
			}
			w.arr.Update(func(ms []MemberStatus) { ms[l] = st })
			w.members[l].dead = st.State == MemberFaulty
		}
		w.asked = w.arr.State().Gen
		w.persist()
		e := w.execs[0]
		for i := range rapid.IntRange(1, 6).Draw(t, "writes") {
			st := w.arr.State()
			var failOn uint64
			for _, m := range perm[nLost:] {
				if st.Members[m].State != MemberFaulty && rapid.IntRange(0, 3).Draw(t, "fail") == 0 {
					failOn |= 1 << uint(m)
				}
			}
			failRead := rapid.IntRange(0, 4).Draw(t, "failRead") == 0
			w.failHook = func(o pOp) bool {
				if failOn&(1<<uint(o.io.Member)) == 0 || o.io.Log {
					return false
				}
				return o.io.Kind == IOWrite || failRead && e.inHealBuf(o.data)
			}
			sector := rapid.Uint64Range(0, uint64(n)-1).Draw(t, "sector")
			k := rapid.Uint64Range(1, min(maxSectors, uint64(n)-sector)).Draw(t, "sectors")
			buf := make([]byte, k<<9)
			fill(buf, uint64(100+i))
			nb := bytes.Clone(buf)
			e.Start(0, ReqWrite, sector, uint32(k), false, buf)
			for len(w.pending) > 0 || w.asked > w.durable {
				if len(w.pending) == 0 {
					w.persist()
					continue
				}
				w.deliver(rapid.IntRange(0, len(w.pending)-1).Draw(t, "op"))
			}
			w.failHook = nil
			err, ok := w.done[0][0]
			if !ok {
				t.Fatal("never completed")
			}
			delete(w.done[0], 0)
			healCov[fmt.Sprintf("%v lost%d err=%v", g.Level, nLost, err != nil)]++
			if e.Stats.Healed.Load() > 0 {
				healCov["healed"]++
			}
			if errors.Is(err, ErrStripeUnhealed) {
				healCov["unhealed"]++
				return // (may be anything there now)
			}
			if err != nil && !errors.Is(err, ErrLastCopy) {
				t.Fatalf("write: %v", err)
			}
			got := make([]byte, n<<9)
			for s := uint32(0); s < n; s += maxSectors {
				kk := min(maxSectors, n-s)
				if err := w.do(t, 0, ReqRead, uint64(s), kk, got[s<<9:(s+kk)<<9]); err != nil {
					t.Fatalf("read %d: %v", s, err)
				}
			}
			for s := uint64(0); s < uint64(n); s++ {
				g1, r1 := got[s<<9:(s+1)<<9], ref[s<<9:(s+1)<<9]
				if s >= sector && s < sector+k {
					nw := nb[(s-sector)<<9 : (s-sector+1)<<9]
					if err == nil && !bytes.Equal(g1, nw) || !bytes.Equal(g1, nw) && !bytes.Equal(g1, r1) {
						t.Fatalf("write %d (%v, states %v): written sector %d reads neither old nor new", i, err, w.arr.State().Members, s)
					}
					continue
				}
				if !bytes.Equal(g1, r1) {
					t.Fatalf("write %d %d+%d (%v, failOn %b, states %v): sector %d not written reads other data", i, sector, k, err, failOn, w.arr.State().Members, s)
				}
			}
			copy(ref, got)
		}
	})
}

// A write of two data chunks of a degraded raid5's stripe whose write to
// one of them fails on the kept member: healStart appends the read back,
// then calls segFailedKept for the next member written, which indexes
// r.failed past its end (submit has not grown it; r.phase is not yet
// parityHealReading, so the scan does not stop at healFrom): a panic on
// the queue thread.
func TestHealTwoMembersWritten(t *testing.T) {
	g := ParityGeometry{Level: Level5, Members: 4, Layout: LeftSymmetric, ChunkSectors: 8, MemberSectors: 64}
	const lost = 3
	w, _ := healWorld(t, g, 1, lost)
	var s uint64
	for ; ; s++ {
		if g.Stripe(s).P != lost {
			break
		}
	}
	m := g.Stripe(s)
	x := int(m.Data[0])
	if x == lost {
		x = int(m.Data[1])
	}
	w.failHook = func(o pOp) bool { return o.io.Kind == IOWrite && !o.io.Log && int(o.io.Member) == x }
	nd := uint64(g.DataMembers())
	buf := make([]byte, nd*g.ChunkSectors<<9)
	fill(buf, 4)
	err := w.do(t, 0, ReqWrite, s*nd*g.ChunkSectors, uint32(nd*g.ChunkSectors), buf)
	if !errors.Is(err, ErrLastCopy) || errors.Is(err, ErrStripeUnhealed) {
		t.Fatalf("%v", err)
	}
}

// A full-stripe write (logged == 0: its entry has no payload, s.log is
// the header page only) on a raid5 rebuilding a member past the stripe,
// failing on a kept member: healWrite calls ParityLogPayload(s.log, rows)
// before looking at s.logged, which slices past s.log's capacity: a panic.
func TestHealFullStripe(t *testing.T) {
	g := ParityGeometry{Level: Level5, Members: 4, Layout: LeftSymmetric, ChunkSectors: 8, MemberSectors: 64}
	const maxSectors = 64
	w := newPWorld(t, g, 1, 1, maxSectors<<9)
	per := g.ParityLogBytesPerRequest(maxSectors << 9)
	w.enableLog(t, ParityLogHeaderSize+uint64(per*4+4095)&^4095, maxSectors<<9)
	w.logHook = func(pOp) {}
	w.arr.Update(func(ms []MemberStatus) { ms[3] = MemberStatus{State: MemberRebuilding, RebuildOffset: g.MemberSectors} })
	w.asked = w.arr.State().Gen
	w.persist()
	m := g.Stripe(0)
	x := int(m.Data[0])
	if x == 3 {
		x = int(m.Data[1])
	}
	w.failHook = func(o pOp) bool { return o.io.Kind == IOWrite && !o.io.Log && int(o.io.Member) == x }
	n := uint32(g.ChunkSectors) * uint32(g.DataMembers())
	buf := make([]byte, n<<9)
	fill(buf, 5)
	err := w.do(t, 0, ReqWrite, 0, n, buf)
	if !errors.Is(err, ErrLastCopy) || errors.Is(err, ErrStripeUnhealed) {
		t.Fatalf("%v (member %d %v)", err, x, w.arr.State().Members[x].State)
	}
}

// inHealBuf reports whether d lies in a heal buffer of any tag.
func (e *ParityExecutor) inHealBuf(d []byte) bool {
	for _, b := range e.healBufs {
		if b != nil && within(d, b) {
			return true
		}
	}
	return false
}
