package engine

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// pMember is an in-memory member of a parity array shared by every
// queue: dead, every operation on it fails.
type pMember struct {
	data []byte
	log  []byte // its write-hole log area (pWorld.enableLog)
	dead bool
}

type pOp struct {
	q    int
	tag  uint16
	op   OpID
	io   MemberIO
	data []byte
}

// pWorld is a parity array in memory run by several queues' executors:
// member operations wait until the test delivers them, in an order it
// draws; persists wait until it says the state is durable; lock wake-ups
// wait until it runs the queue's RetryParked.
type pWorld struct {
	g        ParityGeometry
	arr      *Array
	lock     *StripeLock
	members  []*pMember
	execs    []*ParityExecutor
	pending  []pOp
	done     []map[uint16]error // per queue
	asked    uint64             // highest generation asked to persist
	durable  uint64
	wakes    []bool
	stale    int
	submits  int
	failHook func(o pOp) bool // an injected error for this operation
	// failedOn[q][tag]: members an operation of the request failed on;
	// early: a request acknowledged before such a member's failure was
	// durable.
	failedOn []map[uint16]uint64
	early    string
	// intent, if set, is the executors' bitmap: a member write of a
	// request waiting for it is an error (issued).
	intent *pIntent
	issued string
	// Member timeouts: abandon lets the executor give operations up (they
	// move to late); rebuf[q][tag] is the buffer a Rebuffer gave the
	// request.
	abandon bool
	late    []pOp
	rebuf   []map[uint16][]byte
	// The write-hole log (enableLog): its clock, whether a queue asked
	// for a checkpoint, and what sees each entry written.
	logClock *ParityLogClock
	logAsked bool
	logHook  func(o pOp)
}

// enableLog gives every member a log area of logBytes and every queue
// its ring of it, as the array does.
func (w *pWorld) enableLog(t fataler, logBytes uint64, maxBytes int) {
	w.logClock = NewParityLogClock(1, len(w.execs))
	size := (logBytes - ParityLogHeaderSize) / uint64(len(w.execs)) &^ 4095
	for _, m := range w.members {
		m.log = make([]byte, logBytes)
	}
	for q, e := range w.execs {
		ring, err := NewParityLogRing(ParityLogHeaderSize+uint64(q)*size, size, w.g.ParityLogBytesPerRequest(maxBytes))
		if err != nil {
			t.Fatal(err)
		}
		e.EnableLog(ring, w.logClock, plogUUID, func() { w.logAsked = true }, maxBytes)
	}
}

// fataler is what the helpers need of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type pBackend struct {
	w *pWorld
	q int
}

func (b pBackend) Submit(tag uint16, op OpID, io MemberIO, data []byte) {
	b.w.submits++
	if b.w.intent != nil && b.w.intent.waiting(b.q, tag) && b.w.issued == "" {
		b.w.issued = fmt.Sprintf("queue %d request %d issued %v to member %d while waiting for the bitmap", b.q, tag, io.Kind, io.Member)
	}
	b.w.pending = append(b.w.pending, pOp{b.q, tag, op, io, data})
}

func (b pBackend) Complete(tag uint16, err error) {
	if _, dup := b.w.done[b.q][tag]; dup {
		panic(fmt.Sprintf("queue %d request %d completed twice", b.q, tag))
	}
	b.w.done[b.q][tag] = err
	st := b.w.arr.State()
	for mm := b.w.failedOn[b.q][tag]; mm != 0; mm &= mm - 1 {
		m := bits.TrailingZeros64(mm)
		if ms := st.Members[m]; ms.State != MemberActive && ms.Since > b.w.durable && b.w.early == "" {
			b.w.early = fmt.Sprintf("queue %d request %d acknowledged before member %d's failure (generation %d) was durable (%d)",
				b.q, tag, m, ms.Since, b.w.durable)
		}
	}
	delete(b.w.failedOn[b.q], tag)
}

func (b pBackend) Persist(st *ArrayState) { b.w.asked = max(b.w.asked, st.Gen) }
func (b pBackend) Abandon(tag uint16, op OpID, _ MemberIO) bool {
	if !b.w.abandon {
		return false
	}
	for i, o := range b.w.pending {
		if o.q == b.q && o.tag == tag && o.op == op {
			b.w.pending = append(b.w.pending[:i], b.w.pending[i+1:]...)
			b.w.late = append(b.w.late, o)
			return true
		}
	}
	panic(fmt.Sprintf("Abandon of queue %d tag %d op %#x, which is not pending", b.q, tag, op))
}

func (b pBackend) Rebuffer(tag uint16) []byte {
	if !b.w.abandon {
		panic("no abandonment")
	}
	cur := b.w.execs[b.q].reqs[tag].buf
	nb := bytes.Clone(cur)
	if b.w.rebuf == nil {
		b.w.rebuf = make([]map[uint16][]byte, len(b.w.execs))
	}
	if b.w.rebuf[b.q] == nil {
		b.w.rebuf[b.q] = map[uint16][]byte{}
	}
	b.w.rebuf[b.q][tag] = nb
	return nb
}
func (b pBackend) Stale(uint16, OpID)                   { b.w.stale++ }
func (b pBackend) Departed(uint16, OpID, MemberIO) bool { return false }

func newPWorld(t fataler, g ParityGeometry, queues, depth, maxBytes int) *pWorld {
	arr, err := NewParityArray(g)
	if err != nil {
		t.Fatal(err)
	}
	w := &pWorld{g: g, arr: arr, durable: arr.State().Gen}
	w.lock = NewStripeLock(func(bit int) { w.wakes[bit] = true })
	for range g.Members {
		w.members = append(w.members, &pMember{data: make([]byte, g.MemberSectors<<9)})
	}
	w.wakes = make([]bool, queues)
	for q := range queues {
		e, err := NewParityExecutor(arr, pBackend{w, q}, w.lock, q, depth, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		e.Wake = func() { w.wakes[q] = true }
		w.execs = append(w.execs, e)
		w.done = append(w.done, map[uint16]error{})
		w.failedOn = append(w.failedOn, map[uint16]uint64{})
	}
	return w
}

// run carries out one member operation on its member.
func (w *pWorld) run(o pOp) int32 {
	m := w.members[o.io.Member]
	if m.dead || (w.failHook != nil && w.failHook(o)) {
		return -5
	}
	off, n := o.io.Sector<<9, uint64(o.io.Sectors)<<9
	if o.io.Log {
		if o.io.Kind != IOWrite || !o.io.FUA || w.logHook == nil {
			panic(fmt.Sprintf("log operation %+v", o.io))
		}
		copy(m.log[off:off+n], o.data)
		w.logHook(o)
		return int32(n)
	}
	switch o.io.Kind {
	case IORead:
		copy(o.data, m.data[off:off+n])
		return int32(n)
	case IOWrite:
		copy(m.data[off:off+n], o.data)
		return int32(n)
	case IOFlush:
		return 0
	}
	panic("unexpected member operation " + o.io.Kind.String())
}

// deliver completes pending operation i.
func (w *pWorld) deliver(i int) {
	o := w.pending[i]
	w.pending = append(w.pending[:i], w.pending[i+1:]...)
	res := w.run(o)
	if res < 0 {
		w.failedOn[o.q][o.tag] |= 1 << uint(o.io.Member)
	}
	w.execs[o.q].Done(o.tag, o.op, res)
}

// persist makes the highest generation asked for durable, on every queue.
func (w *pWorld) persist() {
	w.durable = w.asked
	for _, e := range w.execs {
		e.Persisted(w.durable)
	}
}

func (w *pWorld) wake(q int) {
	w.wakes[q] = false
	w.execs[q].RetryParked()
}

// settle runs everything in flight to its end, in FIFO order.
func (w *pWorld) settle() {
	for {
		switch {
		case len(w.pending) > 0:
			w.deliver(0)
		case w.asked > w.durable:
			w.persist()
		case w.logAsked:
			// The checkpointer (as the array's): a checkpoint that moved
			// is persisted at once and every queue woken; one that did
			// not move does nothing.
			w.logAsked = false
			if cp := w.logClock.Checkpoint(); cp > w.logClock.Persisted() {
				w.logClock.SetPersisted(cp)
				for q := range w.wakes {
					w.wakes[q] = true
				}
			}
		default:
			woke := false
			for q, b := range w.wakes {
				if b {
					w.wake(q)
					woke = true
				}
			}
			if !woke {
				return
			}
		}
	}
}

// do runs one request on queue q, tag 0, to its end.
func (w *pWorld) do(t fataler, q int, op ReqOp, sector uint64, sectors uint32, buf []byte) error {
	t.Helper()
	w.execs[q].Start(0, op, sector, sectors, false, buf)
	w.settle()
	err, ok := w.done[q][0]
	if !ok {
		t.Fatalf("%v %d+%d never completed", op, sector, sectors)
	}
	delete(w.done[q], 0)
	return err
}

// parityConsistent checks every stripe's P (and Q) against the parity of
// the data on the members.
func (w *pWorld) parityConsistent(t fataler) {
	t.Helper()
	for s := range w.g.Stripes() {
		w.rowsConsistent(t, s, 0, w.g.ChunkSectors)
	}
}

// rowsConsistent checks rows [lo, hi) of stripe s.
func (w *pWorld) rowsConsistent(t fataler, s, lo, hi uint64) {
	t.Helper()
	g := w.g
	par, err := NewParity(g.DataMembers(), g.Level == Level6)
	if err != nil {
		t.Fatal(err)
	}
	m := g.Stripe(s)
	chunk := func(mem int) []byte {
		return w.members[mem].data[(s*g.ChunkSectors+lo)<<9 : (s*g.ChunkSectors+hi)<<9]
	}
	data := make([][]byte, g.DataMembers())
	for mem := range g.Members {
		if sl := m.Slot[mem]; sl >= 0 {
			data[sl] = chunk(mem)
		}
	}
	n := (hi - lo) << 9
	want := [][]byte{make([]byte, n), make([]byte, n)}[:par.Count()]
	if err := par.Compute(data, want); err != nil {
		t.Fatal(err)
	}
	// (A failed member's parity is not written.)
	active := func(mem int) bool { return w.arr.State().Members[mem].State == MemberActive }
	if active(m.P) && !bytes.Equal(want[0], chunk(m.P)) {
		t.Fatalf("stripe %d rows %d-%d: P on member %d is not the parity of its data", s, lo, hi, m.P)
	}
	if m.Q >= 0 && active(m.Q) && !bytes.Equal(want[1], chunk(m.Q)) {
		t.Fatalf("stripe %d rows %d-%d: Q on member %d is not the parity of its data", s, lo, hi, m.Q)
	}
}

func (w *pWorld) lockFree(t fataler) {
	t.Helper()
	for i := range w.lock.slots {
		if h := w.lock.slots[i].holder.Load(); h != 0 {
			t.Fatalf("stripe lock slot %d still held by %x", i, h)
		}
	}
}

// fill writes a pattern unique to (id, byte offset) into b.
func fill(b []byte, id uint64) {
	x := id*0x9e3779b97f4a7c15 | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

type pInflight struct {
	op      ReqOp
	sector  uint64
	sectors uint32
	buf     []byte
}

// raid56Geo is a small array for the unit tests: 8-sector chunks, 4
// stripes.
func raid56Geo(level Level, members int) ParityGeometry {
	return ParityGeometry{Level: level, Members: members, Layout: LeftSymmetric, ChunkSectors: 8, MemberSectors: 32}
}

// start begins a request on queue q, tag 0, and delivers what it submits
// (but persists nothing and wakes nobody).
func (w *pWorld) start(q int, op ReqOp, sector uint64, sectors uint32, buf []byte) {
	w.execs[q].Start(0, op, sector, sectors, false, buf)
	for len(w.pending) > 0 {
		w.deliver(0)
	}
}

func TestRaid56ExecutorWriteFailureWaitsForPersist(t *testing.T) {
	g := raid56Geo(Level5, 4)
	w := newPWorld(t, g, 1, 1, 64<<10)
	data := make([]byte, 4<<9)
	fill(data, 1)
	// Sectors 2..5 of data chunk 0 of stripe 0: an RMW of its member and P.
	_, _, mem, _ := g.LocateData(2)
	w.failHook = func(o pOp) bool { return o.io.Kind == IOWrite && int(o.io.Member) == mem }
	w.start(0, ReqWrite, 2, 4, data)
	if _, ok := w.done[0][0]; ok {
		t.Fatal("write acknowledged before the member's failure was durable")
	}
	st := w.arr.State()
	if st.Members[mem].State != MemberFaulty || w.asked < st.Gen {
		t.Fatalf("member %d %v, persist asked for %d (state %d)", mem, st.Members[mem].State, w.asked, st.Gen)
	}
	w.failHook = nil
	w.persist()
	if err, ok := w.done[0][0]; !ok || err != nil {
		t.Fatalf("write after persist: done %v, %v", ok, err)
	}
	delete(w.done[0], 0)
	got := make([]byte, 4<<9)
	if err := w.do(t, 0, ReqRead, 2, 4, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back from the parity: %v, equal %v", err, bytes.Equal(got, data))
	}
}

func TestRaid56ExecutorHoldsWritePlannedAroundUndurableFailure(t *testing.T) {
	g := raid56Geo(Level6, 5)
	w := newPWorld(t, g, 1, 1, 64<<10)
	st, _ := w.arr.Fail(3)
	data := make([]byte, 16<<9)
	fill(data, 2)
	w.execs[0].Start(0, ReqWrite, 0, 16, false, data)
	if w.submits != 0 || w.asked != st.Gen {
		t.Fatalf("write issued (%d operations) before the failure was durable; asked %d, want %d", w.submits, w.asked, st.Gen)
	}
	w.persist()
	w.settle()
	if err, ok := w.done[0][0]; !ok || err != nil {
		t.Fatalf("held write: done %v, %v", ok, err)
	}
	delete(w.done[0], 0)
	got := make([]byte, 16<<9)
	if err := w.do(t, 0, ReqRead, 0, 16, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
}

func TestRaid56ExecutorLastCopy(t *testing.T) {
	g := raid56Geo(Level5, 3)
	w := newPWorld(t, g, 1, 1, 64<<10)
	_, _, mem, _ := g.LocateData(0)
	other := (mem + 1) % 3
	w.arr.Fail(other)
	w.persist()
	w.asked = w.arr.State().Gen
	w.persist()
	data := make([]byte, 8<<9)
	fill(data, 3)
	w.failHook = func(o pOp) bool { return int(o.io.Member) == mem }
	err := w.do(t, 0, ReqWrite, 0, 8, data)
	if !errors.Is(err, ErrLastCopy) || !errors.Is(err, ErrNoCopy) {
		t.Fatalf("write failing on the last member needed: %v, want ErrLastCopy", err)
	}
	if s := w.arr.State().Members[mem].State; s != MemberActive {
		t.Fatalf("member %d needed by every stripe was failed (%v)", mem, s)
	}
	// A read that fails on it fails too: nothing else holds its data.
	if err := w.do(t, 0, ReqRead, 0, 8, data); !errors.Is(err, ErrLastCopy) {
		t.Fatalf("read failing on the last member needed: %v", err)
	}
}

func TestRaid56ExecutorReadErrorReconstructed(t *testing.T) {
	for _, level := range []Level{Level5, Level6} {
		g := raid56Geo(level, 5)
		w := newPWorld(t, g, 1, 1, 64<<10)
		n := uint32(g.ArraySectors())
		data := make([]byte, n<<9)
		fill(data, 4)
		if err := w.do(t, 0, ReqWrite, 0, n, data); err != nil {
			t.Fatal(err)
		}
		_, _, mem, _ := g.LocateData(9)
		w.failHook = func(o pOp) bool { return o.io.Kind == IORead && int(o.io.Member) == mem }
		got := make([]byte, n<<9)
		w.execs[0].Start(0, ReqRead, 0, n, false, got)
		for len(w.pending) > 0 {
			w.deliver(0)
		}
		if _, ok := w.done[0][0]; ok {
			t.Fatal("read that failed a member acknowledged before the failure was durable")
		}
		w.persist()
		if err := w.done[0][0]; err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%v: read with a read error: %v, data right %v", level, err, bytes.Equal(got, data))
		}
		delete(w.done[0], 0)
		if s := w.arr.State().Members[mem].State; s != MemberFaulty {
			t.Fatalf("member %d with a read error is %v", mem, s)
		}
	}
}

func TestRaid56ExecutorTwoLostRaid6(t *testing.T) {
	g := raid56Geo(Level6, 6)
	w := newPWorld(t, g, 1, 1, 64<<10)
	n := uint32(g.ArraySectors())
	data := make([]byte, n<<9)
	fill(data, 5)
	if err := w.do(t, 0, ReqWrite, 0, n, data); err != nil {
		t.Fatal(err)
	}
	w.members[1].dead, w.members[4].dead = true, true
	// Writes with two members gone: every mode runs somewhere.
	part := data[5<<9 : 30<<9]
	fill(part, 6)
	if err := w.do(t, 0, ReqWrite, 5, 25, part); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n<<9)
	if err := w.do(t, 0, ReqRead, 0, n, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with two members lost: %v, right %v", err, bytes.Equal(got, data))
	}
	w.members[0].dead = true
	if err := w.do(t, 0, ReqRead, 0, n, got); !errors.Is(err, ErrLastCopy) {
		t.Fatalf("read with three members lost: %v", err)
	}
}

func TestRaid56ExecutorUnsupportedAndFlush(t *testing.T) {
	g := raid56Geo(Level5, 4)
	w := newPWorld(t, g, 1, 1, 64<<10)
	for _, op := range []ReqOp{ReqDiscard, ReqWriteZeroes} {
		if err := w.do(t, 0, op, 0, 8, nil); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Fatalf("%v: %v, want EOPNOTSUPP", op, err)
		}
	}
	if err := w.do(t, 0, ReqRead, g.ArraySectors()-1, 2, make([]byte, 1024)); err == nil {
		t.Fatal("read past the end accepted")
	}
	w.failHook = func(o pOp) bool { return o.io.Member == 2 }
	w.execs[0].Start(0, ReqFlush, ^uint64(0), 0, false, nil)
	if w.submits != 4 {
		t.Fatalf("flush sent %d member flushes, want 4", w.submits)
	}
	w.settle()
	if err := w.done[0][0]; err != nil {
		t.Fatalf("flush with one member failing: %v", err)
	}
	if s := w.arr.State().Members[2].State; s != MemberFaulty {
		t.Fatalf("member failing a flush is %v", s)
	}
}

func TestRaid56ExecutorUntrustedParity(t *testing.T) {
	g := raid56Geo(Level6, 5)
	w := newPWorld(t, g, 1, 1, 64<<10)
	for i, m := range w.members {
		fill(m.data, uint64(100+i)) // never written: garbage, parity too
	}
	w.execs[0].Untrusted = func(uint64) bool { return true }
	n := uint32(g.ArraySectors())
	// Small writes to every stripe (RMW would be chosen over trusted
	// parity): each leaves the rows it wrote consistent, with a member
	// lost too (its rows as the old parity rebuilt them).
	data := make([]byte, 2<<9)
	per := g.ChunkSectors * uint64(g.DataMembers())
	const lost = 2
	for s := uint64(0); s < uint64(n); s += per {
		if s == per {
			w.arr.Fail(lost)
			w.asked = w.arr.State().Gen
			w.persist()
		}
		fill(data, s)
		if err := w.do(t, 0, ReqWrite, s+3, 2, data); err != nil {
			t.Fatal(err)
		}
		if s >= per {
			w.rebuildLost(t, s/per, 3, 5, lost)
		}
		w.rowsConsistent(t, s/per, 3, 5)
		got := make([]byte, 2<<9)
		if err := w.do(t, 0, ReqRead, s+3, 2, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d+2: %v", s+3, err)
		}
	}
}

// A stripe whose parity a write made right, in a region still untrusted
// (the bitmap says it per region, not per stripe), keeps a lost member's
// data through a later write to the stripe: it is rebuilt from the
// parity, not taken as zeroes.
func TestRaid56ExecutorUntrustedKeepsLostData(t *testing.T) {
	for _, level := range []Level{Level5, Level6} {
		g := raid56Geo(level, 5)
		w := newPWorld(t, g, 1, 1, 64<<10)
		for i, m := range w.members {
			fill(m.data, uint64(200+i))
		}
		w.execs[0].Untrusted = func(uint64) bool { return true }
		per := g.ChunkSectors * uint64(g.DataMembers())
		stripe := make([]byte, per<<9)
		fill(stripe, 7)
		if err := w.do(t, 0, ReqWrite, per, uint32(per), stripe); err != nil { // stripe 1, whole: consistent
			t.Fatal(err)
		}
		// Lose the member of stripe 1's data chunk 1, then write 2
		// sectors of its chunk 0 only.
		m := g.Stripe(1)
		victim := int(m.Data[1])
		w.arr.Fail(victim)
		w.asked = w.arr.State().Gen
		w.persist()
		small := make([]byte, 2<<9)
		fill(small, 8)
		if err := w.do(t, 0, ReqWrite, per+1, 2, small); err != nil {
			t.Fatal(err)
		}
		copy(stripe[1<<9:], small)
		got := make([]byte, per<<9)
		if err := w.do(t, 0, ReqRead, per, uint32(per), got); err != nil || !bytes.Equal(got, stripe) {
			t.Fatalf("%s: stripe read back degraded: %v, equal %v (chunk 1 lost with member %d)", level, err, bytes.Equal(got, stripe), victim)
		}
	}
}

// rebuildLost puts into dead member mem's rows [lo, hi) of stripe s what
// the stripe's P rebuilds there (if mem holds data in it), so that
// rowsConsistent can check the rest against it.
func (w *pWorld) rebuildLost(t fataler, s, lo, hi uint64, mem int) {
	t.Helper()
	g := w.g
	m := g.Stripe(s)
	if m.Slot[mem] < 0 {
		return
	}
	rows := func(i int) []byte {
		return w.members[i].data[(s*g.ChunkSectors+lo)<<9 : (s*g.ChunkSectors+hi)<<9]
	}
	out := rows(mem)
	copy(out, rows(m.P))
	for i := range g.Members {
		if m.Slot[i] >= 0 && i != mem {
			subtle.XORBytes(out, out, rows(i))
		}
	}
}

func TestRaid56ExecutorStripeLockAcrossQueues(t *testing.T) {
	g := raid56Geo(Level5, 4)
	w := newPWorld(t, g, 2, 1, 64<<10)
	a, b := make([]byte, 4<<9), make([]byte, 4<<9)
	fill(a, 7)
	fill(b, 8)
	w.execs[0].Start(0, ReqWrite, 0, 4, false, a)  // data chunk 0 of stripe 0
	w.execs[1].Start(0, ReqWrite, 12, 4, false, b) // data chunk 1: same stripe
	if w.execs[1].Parked() != 1 {
		t.Fatalf("second write to a locked stripe not parked")
	}
	for len(w.pending) > 0 {
		w.deliver(0)
	}
	if !w.wakes[1] {
		t.Fatal("queue 1 not woken when the stripe was released")
	}
	w.settle()
	if len(w.done[0]) != 1 || len(w.done[1]) != 1 || w.done[0][0] != nil || w.done[1][0] != nil {
		t.Fatalf("done %v %v", w.done[0], w.done[1])
	}
	w.parityConsistent(t)
	w.lockFree(t)
}

// pSync is a backend that queues operations in a preallocated ring and
// runs them in order: for measuring allocations.
type pSync struct {
	w    *pWorld
	ops  []pOp
	head int
	err  error
	done func() // if set, told of every completion
}

func (b *pSync) Submit(tag uint16, op OpID, io MemberIO, data []byte) {
	b.ops = append(b.ops, pOp{0, tag, op, io, data})
}
func (b *pSync) Complete(_ uint16, err error) {
	b.err = err
	if b.done != nil {
		b.done()
	}
}

func (b *pSync) Persist(*ArrayState)                  {}
func (b *pSync) Abandon(uint16, OpID, MemberIO) bool  { return false }
func (b *pSync) Rebuffer(uint16) []byte               { panic("no abandonment") }
func (b *pSync) Stale(uint16, OpID)                   {}
func (b *pSync) Departed(uint16, OpID, MemberIO) bool { return false }

func TestRaid56ExecutorNoAllocs(t *testing.T) {
	for _, c := range []struct {
		level   Level
		withLog bool
	}{{Level5, false}, {Level6, false}, {Level5, true}, {Level6, true}} {
		level, withLog := c.level, c.withLog
		g := raid56Geo(level, 5)
		g.MemberSectors = 256
		w := newPWorld(t, g, 1, 1, 64<<10)
		be := &pSync{w: w, ops: make([]pOp, 0, 1024)}
		e, err := NewParityExecutor(w.arr, be, w.lock, 0, 1, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		if withLog {
			// The write-hole log, its checkpoints taken at once.
			per := g.ParityLogBytesPerRequest(64 << 10)
			clock := NewParityLogClock(1, 1)
			ring, err := NewParityLogRing(ParityLogHeaderSize, uint64(4*per+4095)&^4095, per)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range w.members {
				m.log = make([]byte, ParityLogHeaderSize+4*per+4096)
			}
			w.logHook = func(pOp) {}
			e.EnableLog(ring, clock, plogUUID, func() { clock.SetPersisted(clock.Checkpoint()) }, 64<<10)
		}
		buf := make([]byte, 64<<10)
		run := func(op ReqOp, sector uint64, sectors uint32) {
			be.ops, be.head = be.ops[:0], 0
			e.Start(0, op, sector, sectors, false, buf)
			for be.head < len(be.ops) {
				o := be.ops[be.head]
				be.head++
				e.Done(o.tag, o.op, w.run(o))
			}
			if be.err != nil {
				t.Fatal(be.err)
			}
		}
		per := uint32(g.ChunkSectors) * uint32(g.DataMembers())
		reqs := func() {
			run(ReqWrite, 1, 2)          // RMW
			run(ReqWrite, 3, 3*per)      // RCW and full stripes
			run(ReqWrite, 5, per+1)      // partial stripes
			run(ReqRead, 2, 2*per+5)     // direct
			run(ReqFlush, ^uint64(0), 0) // every member
		}
		if n := testing.AllocsPerRun(50, reqs); n != 0 {
			t.Errorf("%v (log %v): %v allocations per run of healthy requests", level, withLog, n)
		}
		// One member lost: reads and writes rebuild by XOR.
		w.arr.Fail(1)
		be.err = nil
		e.Persisted(w.arr.State().Gen)
		if n := testing.AllocsPerRun(50, reqs); n != 0 {
			t.Errorf("%v (log %v): %v allocations per run with a member lost", level, withLog, n)
		}
		if level == Level6 {
			// Two lost: reedsolomon's decoder allocates (known, not
			// required to be zero: a doubly degraded array).
			w.arr.Fail(3)
			e.Persisted(w.arr.State().Gen)
			t.Logf("raid6 with two members lost: %v allocations per run", testing.AllocsPerRun(20, reqs))
		}
	}
}

// TestRaid56ExecutorConcurrentQueues runs queues on goroutines against one
// array and one StripeLock: each writes and reads its own sectors, which
// share stripes with the others', so that only the lock keeps the parity
// right (run it with -race too). Raid5 and raid6, healthy and with a
// member failed.
func TestRaid56ExecutorConcurrentQueues(t *testing.T) {
	for _, c := range []struct {
		level   Level
		members int
		layout  ParityLayout
		failed  int
	}{{Level5, 4, LeftSymmetric, -1}, {Level6, 5, RightAsymmetric, -1}, {Level5, 5, LeftAsymmetric, 2}, {Level6, 6, RightSymmetric, 0}} {
		g := ParityGeometry{Level: c.level, Members: c.members, Layout: c.layout, ChunkSectors: 8, MemberSectors: 64}
		const queues, rounds = 4, 1000
		w := newPWorld(t, g, 0, 1, 64<<10)
		if c.failed >= 0 {
			w.arr.Fail(c.failed)
		}
		size := g.ArraySectors()
		wakes := make([]chan struct{}, queues)
		for q := range wakes {
			wakes[q] = make(chan struct{}, 1)
		}
		lock := NewStripeLock(func(bit int) {
			select {
			case wakes[bit] <- struct{}{}:
			default:
			}
		})
		errs := make(chan error, queues)
		refs := make([][]byte, queues)
		for q := range queues {
			be := &pSync{w: w, ops: make([]pOp, 0, 256)}
			e, err := NewParityExecutor(w.arr, be, lock, q, 1, 64<<10)
			if err != nil {
				t.Fatal(err)
			}
			e.Persisted(w.arr.State().Gen)
			ref := make([]byte, size<<9)
			refs[q] = ref
			go func() {
				// Queue q owns chunks c with c % queues == q: the same rows of
				// the same stripes as the other queues' chunks.
				x := uint64(q + 1)
				buf := make([]byte, 2<<9)
				for i := range rounds {
					x = x*6364136223846793005 + 1442695040888963407
					c := (x>>33)%(size/8/queues)*queues + uint64(q)
					s := c*8 + (x>>20)%4*2
					op := ReqWrite
					if i%3 == 2 {
						op = ReqRead
					}
					if op == ReqWrite {
						fill(buf, x)
					}
					be.ops, be.head, be.err = be.ops[:0], 0, nil
					done := false
					be.done = func() { done = true }
					e.Start(0, op, s, 2, false, buf)
					for !done {
						if be.head < len(be.ops) {
							o := be.ops[be.head]
							be.head++
							e.Done(o.tag, o.op, w.run(o))
							runtime.Gosched() // let the other queues in between
							continue
						}
						<-wakes[q]
						e.RetryParked()
					}
					if be.err != nil {
						errs <- be.err
						return
					}
					if op == ReqWrite {
						copy(ref[s<<9:], buf)
					} else if !bytes.Equal(buf, ref[s<<9:(s+2)<<9]) {
						errs <- fmt.Errorf("queue %d read %d+2: wrong data", q, s)
						return
					}
				}
				errs <- nil
			}()
		}
		for range queues {
			if err := <-errs; err != nil {
				t.Fatalf("%v %d members: %v", c.level, c.members, err)
			}
		}
		if c.failed < 0 {
			w.parityConsistent(t)
		}
		// Everything each queue wrote reads back (through the parity
		// where a member is failed).
		w.execs = nil
		be := &pSync{w: w, ops: make([]pOp, 0, 1024)}
		e, err := NewParityExecutor(w.arr, be, lock, 0, 1, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		e.Persisted(w.arr.State().Gen)
		got := make([]byte, size<<9)
		e.Start(0, ReqRead, 0, uint32(size), false, got)
		for be.head < len(be.ops) {
			o := be.ops[be.head]
			be.head++
			e.Done(o.tag, o.op, w.run(o))
		}
		if be.err != nil {
			t.Fatal(be.err)
		}
		for s := uint64(0); s < size; s++ {
			q := s / 8 % queues
			if !bytes.Equal(got[s<<9:(s+1)<<9], refs[q][s<<9:(s+1)<<9]) {
				t.Fatalf("%v %d members: sector %d (queue %d's) reads back wrong", c.level, c.members, s, q)
			}
		}
	}
}

// pInline completes every operation from within Submit.
type pInline struct {
	w   *pWorld
	e   *ParityExecutor
	err error
	n   int
}

func (b *pInline) Submit(tag uint16, op OpID, io MemberIO, data []byte) {
	b.e.Done(tag, op, b.w.run(pOp{0, tag, op, io, data}))
}
func (b *pInline) Complete(_ uint16, err error)         { b.err = err; b.n++ }
func (b *pInline) Persist(st *ArrayState)               { b.e.Persisted(st.Gen) }
func (b *pInline) Abandon(uint16, OpID, MemberIO) bool  { return false }
func (b *pInline) Rebuffer(uint16) []byte               { panic("no abandonment") }
func (b *pInline) Stale(uint16, OpID)                   {}
func (b *pInline) Departed(uint16, OpID, MemberIO) bool { return false }

// TestRaid56ExecutorInlineBackend: a backend may complete operations, and
// persist, from within the executor's calls; a member dying midway is
// failed, the write re-planned and held, and everything reads back.
func TestRaid56ExecutorInlineBackend(t *testing.T) {
	g := raid56Geo(Level6, 5)
	w := newPWorld(t, g, 0, 1, 64<<10)
	be := &pInline{w: w}
	e, err := NewParityExecutor(w.arr, be, w.lock, 0, 1, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	be.e = e
	n := uint32(g.ArraySectors())
	data := make([]byte, n<<9)
	fill(data, 9)
	e.Start(0, ReqWrite, 0, n, true, data)
	if be.n != 1 || be.err != nil {
		t.Fatalf("write: %d completions, %v", be.n, be.err)
	}
	w.members[2].dead = true
	part := data[3<<9 : 40<<9]
	fill(part, 10)
	e.Start(0, ReqWrite, 3, 37, false, part)
	if be.n != 2 || be.err != nil {
		t.Fatalf("write with a member dying: %d completions, %v", be.n, be.err)
	}
	got := make([]byte, n<<9)
	e.Start(0, ReqRead, 0, n, false, got)
	if be.n != 3 || be.err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d completions, %v, right %v", be.n, be.err, bytes.Equal(got, data))
	}
	if s := w.arr.State().Members[2].State; s != MemberFaulty {
		t.Fatalf("dead member %v", s)
	}
}

// A member that stops answering is given up after MemberTimeout (Tick):
// its member fails, a read is answered from the others' reconstruction
// and a write goes on around it. What the late operation may still use
// is kept from the request's later work: a late read landing in the
// request's pages (after Rebuffer gave it others) or in its stripe buffer
// (lent until it comes back) changes nothing the request reads or writes.
func TestRaid56ExecutorMemberTimeout(t *testing.T) {
	for _, level := range []Level{Level5, Level6} {
		t.Run(level.String()+"/read", func(t *testing.T) {
			g := raid56Geo(level, 5)
			w := newPWorld(t, g, 1, 1, 64<<10)
			n := uint32(g.ArraySectors())
			data := make([]byte, n<<9)
			fill(data, 7)
			if err := w.do(t, 0, ReqWrite, 0, n, data); err != nil {
				t.Fatal(err)
			}
			var now time.Duration
			e := w.execs[0]
			e.Now = func() time.Duration { return now }
			e.MemberTimeout = 10 * time.Second
			w.abandon = true
			_, _, mem, _ := g.LocateData(9)
			got := make([]byte, n<<9)
			e.Start(0, ReqRead, 0, n, false, got)
			w.deliverExcept(mem)
			now = 11 * time.Second
			e.Tick()
			if len(w.late) == 0 {
				t.Fatal("nothing given up")
			}
			if s := w.arr.State().Members[mem].State; s != MemberFaulty {
				t.Fatalf("member %d past the timeout is %v", mem, s)
			}
			w.deliverExcept(-1)
			w.landLate(t, 0xee) // the late reads land now, in the old pages
			w.settle()
			if err, ok := w.done[0][0]; !ok || err != nil {
				t.Fatalf("read past the timeout: done %v, %v", ok, err)
			}
			buf := got
			if w.rebuf != nil && w.rebuf[0][0] != nil {
				buf = w.rebuf[0][0]
			}
			if !bytes.Equal(buf, data) {
				t.Fatal("the read given up landed in the data the request answers with")
			}
		})
		t.Run(level.String()+"/write", func(t *testing.T) {
			g := raid56Geo(level, 5)
			w := newPWorld(t, g, 1, 1, 64<<10)
			n := uint32(g.ArraySectors())
			old := make([]byte, n<<9)
			fill(old, 8)
			if err := w.do(t, 0, ReqWrite, 0, n, old); err != nil {
				t.Fatal(err)
			}
			var now time.Duration
			e := w.execs[0]
			e.Now = func() time.Duration { return now }
			e.MemberTimeout = 10 * time.Second
			w.abandon = true
			// Sectors 2..5 of data chunk 0 of stripe 0. raid5: an RMW,
			// whose pre-read of the chunk's member (which hangs) goes into
			// the stripe buffer; the new plan reads the other data into
			// another. raid6: an RCW, whose P write (which hangs) is read
			// from the stripe buffer.
			hang := hangOfWriteAt2(g)
			data := make([]byte, 4<<9)
			fill(data, 9)
			e.Start(0, ReqWrite, 2, 4, false, data)
			w.deliverExcept(hang)
			now = 11 * time.Second
			e.Tick()
			if len(w.late) != 1 || len(e.lent) != 1 {
				t.Fatalf("given up %d, stripe buffers lent %d", len(w.late), len(e.lent))
			}
			w.persist() // the failure is durable
			if level == Level5 {
				// The new plan is issued: one of its pre-reads lands (in
				// another stripe buffer), then the late one, in the
				// buffer it was given.
				if len(w.pending) < 2 {
					t.Fatalf("the new plan issued %d operations", len(w.pending))
				}
				w.deliver(0)
			}
			w.landLate(t, 0xee)
			w.settle()
			if err, ok := w.done[0][0]; !ok || err != nil {
				t.Fatalf("write past the timeout: done %v, %v", ok, err)
			}
			delete(w.done[0], 0)
			// Both buffers back in the pool: the lent one, and the one
			// the new plan took.
			if len(e.lent) != 0 || e.slabs.freeBufs() != 2 || e.slabs.freeBytes() != e.slabs.bytes {
				t.Fatalf("after the late operation came back: lent %d, free %d (%d of %d bytes)", len(e.lent), e.slabs.freeBufs(), e.slabs.freeBytes(), e.slabs.bytes)
			}
			copy(old[2<<9:], data) // (read back through the parity: the hung member failed)
			got := make([]byte, n<<9)
			if err := w.do(t, 0, ReqRead, 0, n, got); err != nil || !bytes.Equal(got, old) {
				t.Fatalf("read back: %v, data right %v", err, bytes.Equal(got, old))
			}
		})
	}
}

// deliverExcept delivers every pending operation but those on member mem.
func (w *pWorld) deliverExcept(mem int) {
	for i := 0; i < len(w.pending); {
		if int(w.pending[i].io.Member) == mem {
			i++
			continue
		}
		w.deliver(i)
	}
}

// landLate completes the operations given up: a read lands as bytes b in
// the buffer it was given.
func (w *pWorld) landLate(t *testing.T, b byte) {
	t.Helper()
	stale := w.stale
	for _, o := range w.late {
		res := int32(0)
		if o.io.Kind == IORead || o.io.Kind == IOWrite {
			res = int32(o.io.Sectors) << 9
		}
		if o.io.Kind == IORead {
			for i := range o.data {
				o.data[i] = b
			}
		}
		w.execs[o.q].Done(o.tag, o.op, res)
	}
	if w.stale != stale+len(w.late) {
		t.Fatalf("%d late results, %d reported stale", len(w.late), w.stale-stale)
	}
	w.late = nil
}

// A read given up in the request's pages whose request then fails (the
// member is the last copy: not failed, ErrLastCopy) never plans again,
// so its rebuffer flag must not outlive it: the next request of the tag
// took no read given up and has no spare buffer reserved (the queue's
// Rebuffer panics then).
func TestRaid56ExecutorRebufferFlagOutlivesRequest(t *testing.T) {
	g := raid56Geo(Level5, 3)
	w := newPWorld(t, g, 1, 1, 64<<10)
	data := make([]byte, 8<<9)
	fill(data, 11)
	if err := w.do(t, 0, ReqWrite, 0, 8, data); err != nil {
		t.Fatal(err)
	}
	_, _, mem, _ := g.LocateData(0)
	other := (mem + 1) % 3
	w.arr.Fail(other)
	w.asked = w.arr.State().Gen
	w.persist()
	var now time.Duration
	e := w.execs[0]
	e.Now = func() time.Duration { return now }
	e.MemberTimeout = 10 * time.Second
	w.abandon = true
	got := make([]byte, 8<<9)
	e.Start(0, ReqRead, 0, 8, false, got)
	if len(w.pending) != 1 || int(w.pending[0].io.Member) != mem {
		t.Fatalf("read planned as %+v", w.pending)
	}
	now = 11 * time.Second
	e.Tick()
	if err, ok := w.done[0][0]; !ok || !errors.Is(err, ErrLastCopy) {
		t.Fatalf("read given up on the last copy: done %v, %v", ok, err)
	}
	delete(w.done[0], 0)
	w.landLate(t, 0xee)
	w.abandon = false // as the queue: no spare is reserved for the tag now
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("next request of the tag: %v", p)
		}
	}()
	got = make([]byte, 8<<9)
	if err := w.do(t, 0, ReqRead, 0, 8, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("next read of the tag: %v, data right %v", err, bytes.Equal(got, data))
	}
}

// A plan never takes the OpID sequence of an operation of its tag given
// up and still out (the sequence is 16 bits and moves on with every
// plan): only that tag's, and only while it is out.
func TestRaid56ExecutorSkipsGivenUpSequences(t *testing.T) {
	w := newPWorld(t, raid56Geo(Level5, 4), 1, 2, 64<<10)
	e := w.execs[0]
	e.given = []givenUp{{tag: 0, id: opID(5, 0)}, {tag: 0, id: opID(6, 2)}}
	if got := e.nextSeq(0, 4); got != 7 {
		t.Fatalf("tag 0 after 4: %d, want 7 (5 and 6 are out)", got)
	}
	if got := e.nextSeq(1, 4); got != 5 {
		t.Fatalf("tag 1 after 4: %d, want 5 (tag 0's are not its)", got)
	}
	if got := e.nextSeq(0, 0xffff); got != 0 {
		t.Fatalf("tag 0 after 0xffff: %d, want 0", got)
	}
	e.returned(0, opID(5, 0))
	if got := e.nextSeq(0, 4); got != 5 {
		t.Fatalf("tag 0 after 4 once 5's came back: %d, want 5", got)
	}
}

// drawParityGeo draws a small raid5 or raid6 geometry: 3 to 6 members
// (raid6: 4 to 6), any layout, 8 or 16-sector chunks, 2 to 6 stripes.
func drawParityGeo(t *rapid.T) ParityGeometry {
	level := Level5
	if rapid.Bool().Draw(t, "raid6") {
		level = Level6
	}
	minM := 3
	if level == Level6 {
		minM = 4
	}
	g := ParityGeometry{Level: level, Members: rapid.IntRange(minM, 6).Draw(t, "members"),
		Layout:       ParityLayout(rapid.IntRange(0, 3).Draw(t, "layout")),
		ChunkSectors: uint64(rapid.SampledFrom([]int{8, 16}).Draw(t, "chunk"))}
	g.MemberSectors = uint64(rapid.IntRange(2, 6).Draw(t, "stripes")) * g.ChunkSectors
	return g
}

// hangOfWriteAt2 is the member to hang for a write of sectors 2..5 (data
// chunk 0 of stripe 0) so that its buffer is in the stripe buffer: raid5
// plans an RMW, which pre-reads the chunk's member; raid6 an RCW, whose
// P write is read from the stripe buffer.
func hangOfWriteAt2(g ParityGeometry) int {
	if g.Level == Level6 {
		return g.Stripe(0).P
	}
	_, _, mem, _ := g.LocateData(2)
	return mem
}
