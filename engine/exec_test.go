package engine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// memMember is an in-memory member with injectable faults.
type memMember struct {
	data    []byte
	failed  bool            // every operation fails (a dead disk)
	badRead map[uint64]bool // sectors whose reads fail until rewritten
}

// memOp is a member operation the backend has accepted but not finished.
type memOp struct {
	tag  uint16
	op   OpID
	io   MemberIO
	data []byte
}

// memBackend runs an executor against memMembers. Operations complete
// when the test delivers them, in an order the test chooses.
type memBackend struct {
	members  []*memMember
	pending  []memOp
	done     map[uint16]error
	persists []*ArrayState
	writes   int // member writes that reached a member
	// abandonment (timeouts)
	refuseAbandon    bool
	abandoned, stale []memOp
	// departed: members (bits) whose operations out now went to a device
	// that left the role since (Departed)
	departed uint64
	// Rebuffer: exec is the executor (whose request buffer is copied);
	// rebuffered holds each tag's buffer since, and old the ones left.
	exec       *Executor
	rebuffered map[uint16][]byte
	old        [][]byte
}

func (b *memBackend) Submit(tag uint16, op OpID, io MemberIO, data []byte) {
	b.pending = append(b.pending, memOp{tag, op, io, data})
}

func (b *memBackend) Complete(tag uint16, err error) {
	if _, dup := b.done[tag]; dup {
		panic(fmt.Sprintf("request %d completed twice", tag))
	}
	b.done[tag] = err
}

func (b *memBackend) Persist(st *ArrayState) { b.persists = append(b.persists, st) }

// run executes one member operation against its member.
func (b *memBackend) run(o memOp) int32 {
	m := b.members[o.io.Member]
	if m.failed {
		return -5
	}
	off := o.io.Sector << 9
	n := uint64(o.io.Sectors) << 9
	switch o.io.Kind {
	case IORead:
		for s := o.io.Sector; s < o.io.Sector+uint64(o.io.Sectors); s++ {
			if m.badRead[s] {
				return -5
			}
		}
		copy(o.data, m.data[off:off+n])
		return int32(n)
	case IOWrite:
		copy(m.data[off:off+n], o.data)
		for s := o.io.Sector; s < o.io.Sector+uint64(o.io.Sectors); s++ {
			delete(m.badRead, s)
		}
		b.writes++
		return int32(n)
	case IOWriteZeroes, IODiscard:
		clear(m.data[off : off+n])
		for s := o.io.Sector; s < o.io.Sector+uint64(o.io.Sectors); s++ {
			delete(m.badRead, s)
		}
		return 0
	case IOFlush:
		return 0
	}
	panic("unknown kind")
}

// runAll delivers pending operations in the order they were submitted
// (and those they lead to) until none is left.
func (b *memBackend) runAll(e *Executor) {
	for len(b.pending) > 0 {
		o := b.pending[0]
		b.pending = b.pending[1:]
		e.Done(o.tag, o.op, b.run(o))
	}
}

// drain delivers pending operations in an order drawn by t until none is
// left.
func (b *memBackend) drain(t *rapid.T, e *Executor) {
	for len(b.pending) > 0 {
		i := rapid.IntRange(0, len(b.pending)-1).Draw(t, "deliver")
		o := b.pending[i]
		b.pending = append(b.pending[:i], b.pending[i+1:]...)
		e.Done(o.tag, o.op, b.run(o))
	}
}

var modelGeometries = []Geometry{
	{Level: Level0, Members: 2, ChunkSectors: 8},
	{Level: Level0, Members: 3, ChunkSectors: 16},
	{Level: Level1, Members: 2, ChunkSectors: 8},
	{Level: Level1, Members: 3, ChunkSectors: 8},
	{Level: Level10, Members: 2, Layout: LayoutN2, ChunkSectors: 8},
	{Level: Level10, Members: 3, Layout: LayoutN2, ChunkSectors: 8},
	{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 16},
	{Level: Level10, Members: 2, Layout: LayoutF2, ChunkSectors: 8},
	{Level: Level10, Members: 3, Layout: LayoutF2, ChunkSectors: 8},
	{Level: Level10, Members: 4, Layout: LayoutO2, ChunkSectors: 8},
	{Level: Level10, Members: 3, Layout: LayoutN3, ChunkSectors: 8},
	{Level: Level10, Members: 4, Layout: LayoutF3, ChunkSectors: 8},
	{Level: Level10, Members: 5, Layout: LayoutO3, ChunkSectors: 16},
}

// TestExecutorModel drives random reads, writes, flushes, discards,
// member failures and bad sectors, with member operations completing in
// random order, against a flat reference image. Every read returns the
// reference bytes, or fails where no copy survives; never stale data.
func TestExecutorModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := modelGeometries[rapid.IntRange(0, len(modelGeometries)-1).Draw(t, "geometry")]
		g.MemberSectors = uint64(rapid.IntRange(4, 12).Draw(t, "chunks")) * g.ChunkSectors
		arr, err := NewArray(g)
		if err != nil {
			t.Fatal(err)
		}
		be := &memBackend{done: map[uint16]error{}}
		for range g.Members {
			be.members = append(be.members, &memMember{data: make([]byte, g.MemberSectors<<9), badRead: map[uint64]bool{}})
		}
		const maxBytes = 64 << 10
		e := NewExecutor(arr, be, 1, maxBytes)
		e.RetryUnit = 1 // the model's bad blocks are single sectors
		size := g.ArraySectors()
		ref := make([]byte, size<<9)
		// alts[s]: after failed writes, sector s may also read as any of these.
		alts := make([][][]byte, size)
		buf := make([]byte, maxBytes)

		lost := func(s uint64) bool { // no copy of s is readable: dead member or bad sector
			var locs [MaxCopies]Location
			for _, l := range g.Locate(s, locs[:0]) {
				if m := be.members[l.Member]; !m.failed && !m.badRead[l.Sector] {
					return false
				}
			}
			return true
		}
		run := func(op ReqOp, sector uint64, sectors uint32, fua bool) error {
			e.Start(0, op, sector, sectors, fua, buf)
			be.drain(t, e)
			if _, ok := be.done[0]; !ok {
				// Waiting for the failure to be persisted: never acknowledged before.
				if len(be.persists) == 0 {
					t.Fatalf("request neither completed nor waiting for a persist")
				}
				e.Persisted(be.persists[len(be.persists)-1].Gen)
			}
			err, ok := be.done[0]
			if !ok {
				t.Fatalf("request not completed after the state was persisted")
			}
			delete(be.done, 0)
			return err
		}

		t.Repeat(map[string]func(*rapid.T){
			"write": func(t *rapid.T) {
				sector := rapid.Uint64Range(0, size-1).Draw(t, "sector")
				n := uint32(rapid.Uint64Range(1, min(size-sector, maxBytes>>9)).Draw(t, "sectors"))
				data := rapid.SliceOfN(rapid.Byte(), 1, 1).Draw(t, "fill")[0]
				for i := range buf[:n<<9] {
					buf[i] = data ^ byte(i>>9)
				}
				err := run(ReqWrite, sector, n, rapid.Bool().Draw(t, "fua"))
				src := buf[:n<<9]
				if err != nil {
					if !errors.Is(err, ErrNoCopy) {
						t.Fatalf("write error %v", err)
					}
					for s := sector; s < sector+uint64(n); s++ {
						alts[s] = append(alts[s], bytes.Clone(src[(s-sector)<<9:(s-sector+1)<<9]))
					}
					return
				}
				copy(ref[sector<<9:], src)
				for s := sector; s < sector+uint64(n); s++ {
					alts[s] = nil
				}
			},
			"read": func(t *rapid.T) {
				sector := rapid.Uint64Range(0, size-1).Draw(t, "sector")
				n := uint32(rapid.Uint64Range(1, min(size-sector, maxBytes>>9)).Draw(t, "sectors"))
				clear(buf)
				err := run(ReqRead, sector, n, false)
				anyLost := false
				for s := sector; s < sector+uint64(n); s++ {
					anyLost = anyLost || lost(s)
				}
				if err != nil {
					if !errors.Is(err, ErrNoCopy) || !anyLost {
						t.Fatalf("read %d+%d failed (%v) though every sector has a live copy", sector, n, err)
					}
					return
				}
				if anyLost {
					t.Fatalf("read %d+%d succeeded though some sector has no live copy", sector, n)
				}
				for s := sector; s < sector+uint64(n); s++ {
					got := buf[(s-sector)<<9 : (s-sector+1)<<9]
					ok := bytes.Equal(got, ref[s<<9:(s+1)<<9])
					for _, a := range alts[s] {
						ok = ok || bytes.Equal(got, a)
					}
					if !ok {
						t.Fatalf("read %d+%d: sector %d holds stale or wrong data", sector, n, s)
					}
				}
			},
			"flush": func(t *rapid.T) {
				err := run(ReqFlush, 0, 0, false)
				// It succeeds when a live member flushed and every dead one
				// is out of use (a dead member kept as the last copy of some
				// data fails it; on raid0 every dead member does: it held
				// the only copy of its chunks).
				alive, kept := false, false
				st := arr.State()
				for i, m := range be.members {
					alive = alive || !m.failed
					kept = kept || (m.failed && (st.Members[i].writable() || g.Level == Level0))
				}
				if (err == nil) != (alive && !kept) {
					t.Fatalf("flush: err %v with a live member: %v, a dead one kept: %v", err, alive, kept)
				}
			},
			"zero": func(t *rapid.T) {
				sector := rapid.Uint64Range(0, size-1).Draw(t, "sector")
				n := uint32(rapid.Uint64Range(1, min(size-sector, maxBytes>>9)).Draw(t, "sectors"))
				err := run(ReqWriteZeroes, sector, n, false)
				for s := sector; s < sector+uint64(n); s++ {
					if err != nil {
						alts[s] = append(alts[s], make([]byte, 512))
					} else {
						clear(ref[s<<9 : (s+1)<<9])
						alts[s] = nil
					}
				}
			},
			"fail member": func(t *rapid.T) {
				m := rapid.IntRange(0, g.Members-1).Draw(t, "member")
				be.members[m].failed = true
			},
			"bad sectors": func(t *rapid.T) {
				m := rapid.IntRange(0, g.Members-1).Draw(t, "member")
				s := rapid.Uint64Range(0, g.MemberSectors-1).Draw(t, "first")
				n := rapid.Uint64Range(1, 16).Draw(t, "count")
				for i := s; i < min(s+n, g.MemberSectors); i++ {
					be.members[m].badRead[i] = true
				}
			},
		})
	})
}

// A write that exposes a member failure is acknowledged only after the new
// state is persisted, and the member is never used again.
func TestExecutorWriteFailureWaitsForPersist(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be.members = append(be.members, &memMember{data: make([]byte, 64<<9), badRead: map[uint64]bool{}})
	}
	be.members[1].failed = true
	e := NewExecutor(arr, be, 2, 4096)
	buf := bytes.Repeat([]byte{7}, 4096)
	e.Start(1, ReqWrite, 0, 8, false, buf)
	for _, o := range be.pending {
		e.Done(o.tag, o.op, be.run(o))
	}
	be.pending = nil
	if _, done := be.done[1]; done {
		t.Fatal("write acknowledged before the member failure was persisted")
	}
	if len(be.persists) != 1 || be.persists[0].Members[1].State != MemberFaulty {
		t.Fatalf("persist requests: %+v", be.persists)
	}
	e.Persisted(be.persists[0].Gen)
	if err, done := be.done[1]; !done || err != nil {
		t.Fatalf("after persist: done=%v err=%v", done, err)
	}
	e.Start(0, ReqWrite, 8, 8, false, buf)
	for _, o := range be.pending {
		if o.io.Member == 1 {
			t.Fatal("a faulty member got I/O")
		}
	}
}

// A read that fails on one copy is served from another and reported for
// repair (range and the members that failed); the executor itself writes
// nothing, so it cannot undo a user write racing the repair.
func TestExecutorReadRepairReported(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	for i := range 2 {
		be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{byte(i + 1)}, 64<<9), badRead: map[uint64]bool{}})
	}
	be.members[0].data = bytes.Clone(be.members[1].data) // equal copies
	be.members[0].badRead[20] = true
	e := NewExecutor(arr, be, 1, 64<<10)
	e.Balance().WriteMostly = 1 << 1 // read member 0 first
	type rep struct {
		sector  uint64
		sectors uint32
		bad     uint64
	}
	var got []rep
	e.ReadRepair = func(sector uint64, sectors uint32, bad uint64, _ int32) { got = append(got, rep{sector, sectors, bad}) }
	buf := make([]byte, 16<<9)
	e.Start(0, ReqRead, 16, 16, false, buf)
	for len(be.pending) > 0 {
		o := be.pending[0]
		be.pending = be.pending[1:]
		if o.io.Kind != IORead {
			t.Fatalf("the executor submitted a %v during a read", o.io.Kind)
		}
		e.Done(o.tag, o.op, be.run(o))
	}
	if err := be.done[0]; err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(buf, be.members[1].data[16<<9:32<<9]) {
		t.Fatal("read returned wrong data")
	}
	// The first failure does not say which block is bad: every retried
	// block read from member 1 is reported, with member 0 as bad.
	covered := false
	for _, r := range got {
		if r.bad != 1 || r.sector < 16 || r.sector+uint64(r.sectors) > 32 {
			t.Fatalf("repair report %+v: outside the read or not naming member 0", r)
		}
		covered = covered || (r.sector <= 20 && 20 < r.sector+uint64(r.sectors))
	}
	if !covered {
		t.Fatalf("repair reports %+v do not cover the bad sector 20", got)
	}
}

// A flush carries no range: the block layer sends (sector_t)-1 as its
// sector, and it must still reach every member.
func TestExecutorFlushIgnoresSector(t *testing.T) {
	g := Geometry{Level: Level0, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be.members = append(be.members, &memMember{data: make([]byte, 64<<9), badRead: map[uint64]bool{}})
	}
	e := NewExecutor(arr, be, 1, 4096)
	e.Start(0, ReqFlush, ^uint64(0), 0, false, nil)
	if len(be.pending) != 2 {
		t.Fatalf("flush planned %d member operations, want 2", len(be.pending))
	}
	for _, o := range be.pending {
		e.Done(o.tag, o.op, be.run(o))
	}
	if err, done := be.done[0]; !done || err != nil {
		t.Fatalf("flush: done=%v err=%v", done, err)
	}
	delete(be.done, 0)
	e.Start(0, ReqWrite, ^uint64(0)-3, 8, false, make([]byte, 4096))
	if err, done := be.done[0]; !done || err == nil {
		t.Fatal("a write past the end (with sector overflow) was accepted")
	}
}

// Planning allocates nothing.
func TestPlanNoAlloc(t *testing.T) {
	g := Geometry{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 128, MemberSectors: 1 << 20}
	arr, _ := NewArray(g)
	ios := make([]MemberIO, 0, arr.MaxPlanIOs(512<<10))
	bal := &LeastLoaded{Inflight: make([]int64, 4)}
	st := arr.State()
	sc := new(Scratch)
	if n := testing.AllocsPerRun(100, func() {
		ios, _ = arr.PlanRead(sc, st, 1000, 1024, 0, 0, bal, ios[:0])
		ios, _ = arr.PlanWrite(sc, st, IOWrite, 1000, 1024, false, ios[:0])
	}); n != 0 {
		t.Fatalf("planning allocates %v times", n)
	}
}

func BenchmarkPlan4K(b *testing.B) {
	g := Geometry{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 1024, MemberSectors: 1 << 30}
	arr, _ := NewArray(g)
	ios := make([]MemberIO, 0, arr.MaxPlanIOs(512<<10))
	bal := &LeastLoaded{Inflight: make([]int64, 4)}
	sc := new(Scratch)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st := arr.State()
		s := uint64(i*8) % (g.ArraySectors() - 8)
		if i%2 == 0 {
			ios, _ = arr.PlanRead(sc, st, s, 8, 0, 0, bal, ios[:0])
		} else {
			ios, _ = arr.PlanWrite(sc, st, IOWrite, s, 8, false, ios[:0])
		}
	}
}

// Abandon implements Backend: abandonment is allowed unless refuse is set.
func (b *memBackend) Abandon(tag uint16, op OpID, io MemberIO) bool {
	if b.refuseAbandon {
		return false
	}
	b.abandoned = append(b.abandoned, memOp{tag: tag, op: op, io: io})
	return true
}

// Rebuffer implements Backend: a new buffer with the request's data.
func (b *memBackend) Rebuffer(tag uint16) []byte {
	cur := b.exec.reqs[tag].buf
	nb := make([]byte, len(cur))
	copy(nb, cur)
	if b.rebuffered == nil {
		b.rebuffered = map[uint16][]byte{}
	}
	b.rebuffered[tag] = nb
	b.old = append(b.old, cur)
	return nb
}

// buf is tag's buffer now: orig, the one its request started with,
// unless it was given another (Rebuffer).
func (b *memBackend) buf(tag uint16, orig []byte) []byte {
	if nb, ok := b.rebuffered[tag]; ok {
		return nb
	}
	return orig
}

// Stale implements Backend.
func (b *memBackend) Stale(tag uint16, op OpID) { b.stale = append(b.stale, memOp{tag: tag, op: op}) }

// Departed implements Backend: the operations on a member in departed
// (its device left the role after they were submitted).
func (b *memBackend) Departed(tag uint16, op OpID, io MemberIO) bool {
	return b.departed&(1<<uint(io.Member)) != 0
}

// A write planned without a member whose failure is not durable yet (failed
// by another request, by a read timeout, by the bitmap flusher or a sync
// job through Array.Fail) is acknowledged only once the failure is: a
// crash in between would bring the member back as in sync without the
// write. Found by resync's TestStackModel: a member failed writing the
// bitmap, a write then went to the other member only and was acknowledged,
// the crash came before the superblocks recorded the failure, and after
// the restart the stale member served the sector.
func TestExecutorWriteAroundUnpersistedFailure(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	newExec := func() (*Array, *memBackend, *Executor) {
		arr, _ := NewArray(g)
		be := &memBackend{done: map[uint16]error{}}
		for range 2 {
			be.members = append(be.members, &memMember{data: make([]byte, 64<<9), badRead: map[uint64]bool{}})
		}
		return arr, be, NewExecutor(arr, be, 2, 4096)
	}
	deliver := func(be *memBackend, e *Executor) {
		for len(be.pending) > 0 {
			o := be.pending[0]
			be.pending = be.pending[1:]
			e.Done(o.tag, o.op, be.run(o))
		}
	}
	buf := bytes.Repeat([]byte{7}, 4096)

	// Member 1 is failed from outside the executor (the bitmap flusher, a
	// sync job): the next write waits for that state to be durable.
	arr, be, e := newExec()
	st, _ := arr.Fail(1)
	e.Start(0, ReqWrite, 0, 8, false, buf)
	deliver(be, e)
	if _, done := be.done[0]; done {
		t.Fatal("a write that skipped a member failed but not persisted was acknowledged")
	}
	if len(be.persists) != 1 || be.persists[0].Gen < st.Gen {
		t.Fatalf("persist requests %v, want one for gen %d", be.persists, st.Gen)
	}
	e.Persisted(be.persists[0].Gen)
	deliver(be, e) // (issued once the failure is durable)
	if err, done := be.done[0]; !done || err != nil {
		t.Fatalf("after the persist: done %v err %v", done, err)
	}
	// Once durable, writes go at once; so do writes after state changes
	// that drop no member (rebuild progress).
	delete(be.done, 0)
	arr.Update(func(ms []MemberStatus) {})
	e.Start(0, ReqWrite, 8, 8, false, buf)
	deliver(be, e)
	if err, done := be.done[0]; !done || err != nil || len(be.persists) != 1 {
		t.Fatalf("write after the durable failure: done %v err %v, %d persists", done, err, len(be.persists))
	}

	// Member 1 fails under another request (tag 0, waiting for the
	// persist): a write planned meanwhile (tag 1) waits too.
	arr, be, e = newExec()
	be.members[1].failed = true
	e.Start(0, ReqWrite, 0, 8, false, buf)
	deliver(be, e)
	e.Start(1, ReqWrite, 8, 8, false, buf)
	for _, o := range be.pending {
		if o.io.Member == 1 {
			t.Fatal("a faulty member got I/O")
		}
	}
	deliver(be, e)
	if len(be.done) != 0 {
		t.Fatalf("acknowledged before the failure was persisted: %v", be.done)
	}
	e.Persisted(arr.State().Gen)
	deliver(be, e) // (tag 1 is issued once the failure is durable)
	if len(be.done) != 2 || be.done[0] != nil || be.done[1] != nil {
		t.Fatalf("after the persist: %v", be.done)
	}

	// A member made missing by Update (removal) counts too.
	arr, be, e = newExec()
	arr.Update(func(ms []MemberStatus) { ms[0] = MemberStatus{State: MemberMissing} })
	e.Start(0, ReqWrite, 0, 8, false, buf)
	deliver(be, e)
	if _, done := be.done[0]; done || len(be.persists) != 1 {
		t.Fatalf("write around a removed member: acknowledged %v, %d persists", done, len(be.persists))
	}
}

// MemberStatus.Since is the generation at which the member entered its
// state: kept across updates that leave the state (rebuild progress), new
// when it changes, whatever the caller wrote; a member failed and put back
// has a new one although its state is the same.
func TestMemberStatusSince(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	st := arr.Update(func(ms []MemberStatus) { ms[1] = MemberStatus{State: MemberRebuilding, Since: 99} })
	rebuilding := st.Members[1].Since
	if rebuilding != st.Gen || st.Members[0].Since != 0 {
		t.Fatalf("after rebuilding: %+v (gen %d)", st.Members, st.Gen)
	}
	st = arr.Update(func(ms []MemberStatus) { ms[1].RebuildOffset = 32 })
	if st.Members[1].Since != rebuilding {
		t.Fatalf("rebuild progress changed Since: %+v", st.Members[1])
	}
	arr.Fail(1)
	st = arr.Update(func(ms []MemberStatus) { ms[1] = MemberStatus{State: MemberRebuilding} })
	if st.Members[1].Since == rebuilding || st.Members[1].Since != st.Gen {
		t.Fatalf("a member failed and put back kept its Since: %+v (gen %d)", st.Members[1], st.Gen)
	}
	st = arr.SetState([]MemberStatus{{State: MemberActive}, {State: MemberMissing}})
	if st.Members[0].Since != 0 || st.Members[1].Since != st.Gen || st.DropGen != st.Gen {
		t.Fatalf("SetState: %+v, DropGen %d (gen %d)", st.Members, st.DropGen, st.Gen)
	}
}

// In a range awaiting resync, a read that fails on the chosen copy (the
// lowest-numbered readable member) and is narrowed takes from it every
// block it can read: only the bad block comes from another copy (and is
// reported for repair). Taking the good blocks from another copy, whose data
// may differ, changed answers that earlier reads had given. Found by
// resync's TestStackModel (raid1 x3 after a crash, a write in flight had
// reached member 0 only, member 0 had a bad sector next to it).
func TestExecutorRetryInResyncRangeKeepsChosenCopy(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'n'}, 64<<9), badRead: map[uint64]bool{1: true}})
	be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'o'}, 64<<9), badRead: map[uint64]bool{}})
	fi := &fakeIntent{t: t, durable: map[int]bool{}, inflight: map[int]int{}, needSync: map[int]bool{0: true}}
	e := NewExecutor(arr, be, 2, 4096)
	e.Intent = fi
	e.RetryUnit = 1
	var repairs [][3]uint64
	e.ReadRepair = func(sector uint64, sectors uint32, bad uint64, _ int32) {
		repairs = append(repairs, [3]uint64{sector, uint64(sectors), bad})
	}
	buf := make([]byte, 1024)
	e.Start(0, ReqRead, 0, 2, false, buf)
	for len(be.pending) > 0 {
		o := be.pending[0]
		be.pending = be.pending[1:]
		e.Done(o.tag, o.op, be.run(o))
	}
	if err, ok := be.done[0]; !ok || err != nil {
		t.Fatalf("read: done %v err %v", ok, err)
	}
	if buf[0] != 'n' || buf[512] != 'o' {
		t.Fatalf("read %q %q, want member 0's sector 0 and member 1's sector 1", buf[0], buf[512])
	}
	if len(repairs) != 1 || repairs[0] != [3]uint64{1, 1, 1} {
		t.Fatalf("repair reports %v, want sector 1 of member 0 only", repairs)
	}
}

// A read of a range awaiting resync whose chosen copy is busy (-EAGAIN: a
// write given up on it is still out) fails rather than answer from the
// other copy: the chosen copy stays in sync and answers again later, with
// its own data, which the resync then copies (found by the array model
// on raid10: a read that changed with no write in between).
// Outside such ranges the other copy answers.
func TestExecutorUnsyncedReadOfBusyChosenCopyFails(t *testing.T) {
	for _, needSync := range []bool{true, false} {
		g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
		arr, _ := NewArray(g)
		be := &memBackend{done: map[uint16]error{}}
		be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'n'}, 64<<9), badRead: map[uint64]bool{}})
		be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'o'}, 64<<9), badRead: map[uint64]bool{}})
		fi := &fakeIntent{t: t, durable: map[int]bool{}, inflight: map[int]int{}, needSync: map[int]bool{0: needSync}}
		e := NewExecutor(arr, be, 2, 4096)
		e.Intent = fi
		e.RetryUnit = 1
		buf := make([]byte, 1024)
		e.Start(0, ReqRead, 0, 2, false, buf)
		for len(be.pending) > 0 {
			o := be.pending[0]
			be.pending = be.pending[1:]
			res := be.run(o)
			if o.io.Member == 0 {
				res = -errnoAgain
			}
			e.Done(o.tag, o.op, res)
		}
		err, ok := be.done[0]
		if !ok {
			t.Fatalf("needSync %v: the read did not complete", needSync)
		}
		if needSync && !errors.Is(err, ErrChosenCopyBusy) {
			t.Fatalf("read of a range awaiting resync: err %v, data %q, want ErrChosenCopyBusy", err, buf[:1])
		}
		if !needSync && (err != nil || buf[0] != 'o') {
			t.Fatalf("read of a synced range: err %v, data %q, want member 1's", err, buf[:1])
		}
		if st := arr.State(); st.Members[0].State != MemberActive {
			t.Fatalf("needSync %v: a busy member was failed (%v)", needSync, st.Members[0].State)
		}
	}
}

// A read of a range awaiting resync that another copy answers because the
// chosen copy's member failed is acknowledged only once that failure is
// durable: a crash before the record would bring the member back as the
// chosen copy, and the same read would answer its (different) data. Reads
// of synced ranges do not wait. (Found by the array model: a read served
// by member 2 after member 1 failed, then kill -9, then member 1's data.)
func TestExecutorUnsyncedReadWaitsForDurableFailure(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'n'}, 64<<9), badRead: map[uint64]bool{}})
	be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'o'}, 64<<9), badRead: map[uint64]bool{}})
	fi := &fakeIntent{t: t, durable: map[int]bool{}, inflight: map[int]int{}, needSync: map[int]bool{0: true}}
	e := NewExecutor(arr, be, 2, 4096)
	e.Intent = fi
	e.Persisted(arr.State().Gen)
	st, _ := arr.Fail(0)
	run := func() {
		for len(be.pending) > 0 {
			o := be.pending[0]
			be.pending = be.pending[1:]
			e.Done(o.tag, o.op, be.run(o))
		}
	}
	e.Start(0, ReqRead, 8, 8, false, make([]byte, 4096)) // region 1: in sync
	e.Start(1, ReqRead, 0, 8, false, make([]byte, 4096)) // region 0: awaits resync
	run()
	if err, ok := be.done[0]; !ok || err != nil {
		t.Fatalf("read of a synced range: done %v err %v", ok, err)
	}
	if _, ok := be.done[1]; ok {
		t.Fatal("a read of a range awaiting resync answered from another copy before the failure that made it so was durable")
	}
	if len(be.persists) == 0 {
		t.Fatal("no persist asked for")
	}
	e.Persisted(st.Gen)
	if err, ok := be.done[1]; !ok || err != nil {
		t.Fatalf("read after the persist: done %v err %v", ok, err)
	}
}

// MemberError is told of a failed read once, not of each retry unit of
// it that fails again (a range awaiting resync is retried on the chosen
// copy first, unit by unit): the array counts failed reads against md's
// corrected read error budget.
func TestExecutorMemberErrorOncePerFailedRead(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'n'}, 64<<9), badRead: map[uint64]bool{1: true, 2: true, 5: true}})
	be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'o'}, 64<<9), badRead: map[uint64]bool{}})
	fi := &fakeIntent{t: t, durable: map[int]bool{}, inflight: map[int]int{}, needSync: map[int]bool{0: true}}
	e := NewExecutor(arr, be, 2, 4096)
	e.Intent = fi
	e.RetryUnit = 1
	var told []int
	e.MemberError = func(member int, kind IOKind, res int32) {
		if kind == IORead {
			told = append(told, member)
		}
	}
	buf := make([]byte, 8<<9)
	e.Start(0, ReqRead, 0, 8, false, buf)
	be.runAll(e)
	if err, ok := be.done[0]; !ok || err != nil {
		t.Fatalf("read: done %v err %v", ok, err)
	}
	if len(told) != 1 || told[0] != 0 {
		t.Fatalf("MemberError told of reads of members %v, want member 0 once", told)
	}
}

// TestExecutorMemberErrorEveryFailingCopy: a read that fails on the copy
// it was planned on and then on the first copy its retry tries tells
// MemberError of both members, once each.
func TestExecutorMemberErrorEveryFailingCopy(t *testing.T) {
	g := Geometry{Level: Level1, Members: 3, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'n'}, 64<<9), badRead: map[uint64]bool{1: true, 2: true}})
	be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'n'}, 64<<9), badRead: map[uint64]bool{2: true}})
	be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'n'}, 64<<9), badRead: map[uint64]bool{}})
	fi := &fakeIntent{t: t, durable: map[int]bool{}, inflight: map[int]int{}, needSync: map[int]bool{0: true}}
	e := NewExecutor(arr, be, 2, 4096)
	e.Intent = fi
	e.RetryUnit = 1
	told := map[int]int{}
	e.MemberError = func(member int, kind IOKind, res int32) {
		if kind == IORead {
			told[member]++
		}
	}
	buf := make([]byte, 8<<9)
	e.Start(0, ReqRead, 0, 8, false, buf)
	be.runAll(e)
	if err, ok := be.done[0]; !ok || err != nil {
		t.Fatalf("read: done %v err %v", ok, err)
	}
	if len(told) != 2 || told[0] != 1 || told[1] != 1 {
		t.Fatalf("MemberError told of reads %v (member: times), want members 0 and 1 once each", told)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{'n'}, 8<<9)) {
		t.Fatal("read: wrong data")
	}
}

// TestExecutorMemberErrorBusyThenFailed: a member too busy to take a read
// (EAGAIN) did not fail it; when a retry of the same request then fails
// there, that error is told.
func TestExecutorMemberErrorBusyThenFailed(t *testing.T) {
	g := Geometry{Level: Level1, Members: 3, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	for range 3 {
		be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'n'}, 64<<9), badRead: map[uint64]bool{2: true}})
	}
	e := NewExecutor(arr, be, 2, 4096)
	e.RetryUnit = 1
	e.bal.Inflight[1], e.bal.Inflight[2] = 1<<30, 1<<30 // planned on member 0
	told := map[int][]int32{}
	e.MemberError = func(member int, kind IOKind, res int32) {
		if kind == IORead {
			told[member] = append(told[member], res)
		}
	}
	buf := make([]byte, 8<<9)
	e.Start(0, ReqRead, 0, 8, false, buf)
	if len(be.pending) != 1 || be.pending[0].io.Member != 0 {
		t.Fatalf("read planned as %+v", be.pending)
	}
	o := be.pending[0]
	be.pending = be.pending[1:]
	e.Done(o.tag, o.op, -errnoAgain)
	be.runAll(e)
	if _, ok := be.done[0]; !ok {
		t.Fatal("read not completed")
	}
	for m := range 3 {
		if n := len(told[m]); n == 0 || told[m][n-1] != -5 {
			t.Errorf("member %d: told %v, want its EIO told last", m, told[m])
		}
	}
	if n := len(told[0]); n != 2 || told[0][0] != -errnoAgain {
		t.Errorf("member 0: told %v, want EAGAIN then EIO", told[0])
	}
}

// TestExecutorMemberErrorHungReadOnce: a read past the timeout that the
// backend cannot give up is told as timed out; its late failure is not
// told again.
func TestExecutorMemberErrorHungReadOnce(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1024}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}, refuseAbandon: true}
	for range 2 {
		be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'x'}, 1024<<9), badRead: map[uint64]bool{}})
	}
	var now time.Duration
	e := NewExecutor(arr, be, 4, 64<<10)
	be.exec = e
	e.Now = func() time.Duration { return now }
	e.MemberTimeout = 10 * time.Second
	e.bal.Inflight[1] = 1 << 30 // reads go to member 0
	var told []int32
	e.MemberError = func(member int, kind IOKind, res int32) {
		if kind == IORead && member == 0 {
			told = append(told, res)
		}
	}
	buf := make([]byte, 4096)
	e.Start(0, ReqRead, 0, 8, false, buf)
	if len(be.pending) != 1 || be.pending[0].io.Member != 0 {
		t.Fatalf("read planned as %+v", be.pending)
	}
	hung := be.pending[0]
	be.pending = nil
	now = 11 * time.Second
	e.Tick()
	e.Tick()
	if len(told) != 1 || told[0] != -errnoTimedOut {
		t.Fatalf("after the timeout: told %v, want one ETIMEDOUT", told)
	}
	e.Done(hung.tag, hung.op, -5)
	be.runAll(e)
	if err, ok := be.done[0]; !ok || err != nil {
		t.Fatalf("read: done %v err %v", ok, err)
	}
	if len(told) != 1 {
		t.Fatalf("told %v for member 0, want the timeout once", told)
	}
}
