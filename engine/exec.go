package engine

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ublk-raid/ublk-raid/bitmap"
)

// ReqOp is the operation of a block request.
type ReqOp uint8

// Request operations.
const (
	ReqRead ReqOp = iota
	ReqWrite
	ReqFlush
	ReqDiscard
	ReqWriteZeroes
)

// Backend carries out an Executor's member operations. The ring-backed one
// puts them on the queue's io_uring; tests use in-memory and
// fault-injecting members. All methods are called on the executor's thread.
type Backend interface {
	// Submit starts io, for request tag as its op'th operation; data is the
	// part of the request buffer it reads or writes (nil for others). Its
	// result must come back through Executor.Done(tag, op, res), with res
	// the full byte count (reads and writes), 0 (others) or a negative errno.
	// -EAGAIN says the member cannot take io now, with no error of its own
	// (a write given up on it is still out): a read of a range awaiting
	// resync that its chosen copy answers so fails rather than answer
	// from another copy (see retryRead).
	// op identifies the operation within the request (OpID); a result that
	// comes back after its request ended (an abandoned operation) is
	// recognised by it and dropped.
	Submit(tag uint16, op OpID, io MemberIO, data []byte)
	// Complete finishes request tag, exactly once.
	Complete(tag uint16, err error)
	// Persist asks that member state st (a member failed) be made durable
	// on the surviving members' superblocks; the backend then calls
	// Executor.Persisted with a generation >= st.Gen (possibly from within
	// Persist). Writes that exposed the failure, or were planned without a
	// member whose failure is not known durable (ArrayState.DropGen), wait
	// until then. Several queues may ask for the same generation; the
	// backend writes it once.
	Persist(st *ArrayState)
	// Abandon asks whether member operation op of request tag, which has
	// not completed within MemberTimeout, may be given up: the member is
	// then failed and the request carries on without it. io is the
	// operation. A read into the request's buffer may still write to it
	// when it ends: the backend must then give the tag another buffer
	// (with the request's data) before the request completes, and keep
	// the old one until the late result arrives (Stale). Once a read is
	// given up, the executor puts no other member read of the request
	// into the buffer it was given: it calls Rebuffer before submitting
	// any (the retries of the range given up, first of all), so a late
	// read can only land where nothing is read from any more. A late write
	// may still land on the member: the backend must not let the device
	// be rebuilt before it has (Stale). It returns false when it cannot
	// (no spare buffer, or a zero-copy request's pages): the operation is
	// waited for, and a read's member is failed all the same (but the last
	// copy), so that later reads leave it alone.
	Abandon(tag uint16, op OpID, io MemberIO) bool
	// Rebuffer gives request tag, which gave up a read (Abandon returned
	// true for an IORead), another buffer now, with the data of its
	// current one copied in, and returns it; the request's later member
	// operations use it, and the request completes with it (or with one
	// from a later Rebuffer or Complete). The old buffer is kept until the
	// request has completed and its operations given up have all come
	// back (Stale). It cannot fail: Abandon reserved the buffer.
	// Operations still out in an old buffer that was not given up are
	// copied into the current one by the executor as they complete.
	Rebuffer(tag uint16) []byte
	// Stale delivers the late result of an abandoned operation.
	Stale(tag uint16, op OpID)
	// Departed reports whether operation op of request tag (io) went to
	// a device that no longer holds its role: the role was given to
	// another device (replace, a spare, re-add) or emptied (remove) since
	// it was submitted. Its error or timeout then says nothing of the
	// role's device, which is not failed for it (md ties each bio to its
	// rdev, not to the slot); a read is retried elsewhere, and a write
	// counts for no copy, whatever its result (md counts none on a
	// device no longer in sync).
	Departed(tag uint16, op OpID, io MemberIO) bool
}

// OpID identifies a member operation: the request's sequence number in
// the high 16 bits (it changes with every request of a tag), the index in
// the request's plan in the low 16.
type OpID uint32

func opID(seq uint16, i int) OpID { return OpID(seq)<<16 | OpID(uint16(i)) }

// Index is the operation's index in its request's plan.
func (o OpID) Index() int { return int(uint16(o)) }

func (o OpID) seq() uint16 { return uint16(o >> 16) }

// Seq is the sequence number of the operation's request (the same for
// every operation of one request of a tag).
func (o OpID) Seq() uint16 { return o.seq() }

// IntentLog is the write-intent bitmap as the executor uses it
// (*bitmap.Bitmap). Every write-type request is bracketed by StartWrite and
// EndWrite; a write whose StartWrite returned false is held until the
// bitmap's flusher hands its token back (Executor.Resume).
type IntentLog interface {
	Regions(sector, count uint64) (first, last int)
	StartWrite(first, last int, w bitmap.Waiter) bool
	EndWrite(first, last int)
	// CopiesDiffer: the copies of region r's written data may differ
	// until a resync, so its reads go to the chosen copy.
	CopiesDiffer(r int) bool
}

// WriteBarrier keeps user writes out of the range a background sync is
// copying (*Barrier), and with them reads of ranges awaiting resync. Enter never blocks: false means the request must be
// retried after a wake-up (Executor.RetryParked).
type WriteBarrier interface {
	Enter(sector uint64, sectors uint32) bool
	Exit(sector uint64, sectors uint32)
}

type request struct {
	op      ReqOp
	sector  uint64
	sectors uint32
	fua     bool
	buf     []byte
	ios     []MemberIO
	into    [][]byte        // per ios entry (reads and writes): the data it was given, in buf when submitted
	failed  []bool          // per ios entry: the member operation failed
	done    []bool          // per ios entry: its result came (or it was abandoned)
	hung    []bool          // per ios entry: past the timeout, not abandoned: its member was failed
	times   []time.Duration // per ios entry: when it was submitted (with Now)
	seq     uint16          // changes with every request of the tag (OpID)
	pending int
	err     error
	needGen uint64        // acknowledge only once this state generation is durable
	planned int           // len(ios) of the first plan; later entries are retries and repairs
	told    uint64        // members whose failed read MemberError was told of (once per request)
	sent    time.Duration // when a timed read's first plan was submitted (Now)
	active  bool
	// rebuffer: a read of the request was given up and may still land
	// in buf: the next member reads go to a new buffer (Rebuffer).
	rebuffer bool
	// Write gating: entered the barrier; started in the bitmap (regions
	// first..last); waiting for the bitmap since waitSince.
	entered, started, waiting bool
	first, last               int
	waitSince                 time.Duration
	// lastCopy: a member operation failed on a member kept because it
	// holds the last in-sync copy (the request fails with EIO);
	// unsupported: a member refused WRITE_ZEROES (the request fails with
	// EOPNOTSUPP, and the kernel falls back to writing zeroes).
	lastCopy, unsupported bool
	// zeroesFlushed: a WRITE_ZEROES with FUA had its members flushed
	// (complete): a member's zeroing (fallocate) carries no FUA.
	zeroesFlushed bool
	// refused: a member refused a DISCARD or WRITE_ZEROES (EOPNOTSUPP,
	// EINVAL) or failed a DISCARD (which fails no member); applied: a
	// member carried one out. Both: the copies may now differ over the
	// range.
	refused, applied bool
	// discardErr: a member failed a DISCARD (EIO; no member failed):
	// with no copy applying it either, the request fails (writeOutcome).
	discardErr bool
}

// Executor runs requests of one queue against an Array through a Backend.
// It is single-threaded: every method must be called on the queue's thread.
// It plans member I/O from the array state at the start of each request,
// retries failed reads on other copies and reports the bad copies for
// repair (ReadRepair), marks members that fail writes faulty, and acknowledges a write
// that exposed a failure, or skipped a member whose failure may not be
// durable yet, only after the new state is durable.
type Executor struct {
	arr  *Array
	be   Backend
	bal  Balance
	sc   Scratch
	reqs []request
	persistGate
	// given: operations given up (Tick) whose results have not come
	// back. No new request of their tag takes their OpID sequence (see
	// Start).
	given givenUps
	// MemberError, if set, is told of every failed member operation,
	// timeouts included; of reads, once per member and request (one
	// failed read, however many of its retry units fail again there).
	MemberError func(member int, kind IOKind, res int32)
	// RetryUnit is the block size, in sectors, to which a failed read is
	// narrowed before a member is ruled out for it (the logical block
	// size; default 8, 4 KiB).
	RetryUnit uint32

	// Intent, if set, is the write-intent bitmap: writes wait until their
	// regions are durably dirty, and reads of regions that need sync go to
	// one chosen copy (the lowest-numbered readable one, as resync), so answers are stable
	// until resync has made the copies equal.
	Intent IntentLog
	// Token is this executor's high bits of bitmap tokens (token =
	// Token<<32 | tag): the flusher routes a released token to its queue.
	Token uint32
	// Barrier, if set, keeps writes out of ranges being synced.
	Barrier WriteBarrier
	// ResyncFrom, if set (an array without a bitmap: Intent nil), is the
	// array sector from which the copies may differ (a full resync is
	// pending or running; math.MaxUint64: none). Reads reaching past it
	// are treated as reads of regions needing sync: answered by the
	// chosen copy, through the barrier (md reads the first disk above its
	// resync point).
	ResyncFrom *atomic.Uint64
	// Now and Waited, if set, measure how long writes wait for the bitmap.
	// Now also times member reads for read balancing (Balance).
	Now    func() time.Duration
	Waited func(time.Duration)
	// MemberTimeout, if set (with Now), is how long a member operation
	// may take: Tick gives up older ones and fails their member (6.12's
	// ublk has no timeout of its own for a root-created device: without
	// this a hung member hangs the array).
	MemberTimeout time.Duration
	// OpDone, if set (with Now), is told of every completed member
	// operation (operation id of request tag, so that the backend can
	// tell which device it went to) with its result and latency
	// (metrics); of one given up at the timeout once, then, with
	// -ETIMEDOUT (its late result is dropped).
	OpDone func(tag uint16, id OpID, member int32, kind IOKind, sectors uint32, res int32, latency time.Duration)
	// ReadRepair, if set, is told of a range a retried read got from one
	// copy (the member from) after others (the members in bad) failed it:
	// the caller rewrites those copies from the one that answered, with
	// the range raised in the write barrier (no write in flight on any
	// queue), so that a range whose copies may differ (awaiting resync)
	// reads the same again. The executor does not rewrite them itself: a
	// user write to the range between this read and the rewrite, on any
	// queue, would be undone on those members.
	ReadRepair func(sector uint64, sectors uint32, bad uint64, from int32)
	// Unsynced, if set, is told of the range of a write, discard or
	// write-zeroes that failed on a member kept because it holds the last
	// in-sync copy of some data (raid10: of other chunks), before the
	// request completes: the other copies of the range took the write and
	// that member did not, so the copies differ. The caller must make
	// reads of the range go to one chosen copy (IntentLog.CopiesDiffer, or
	// ResyncFrom) before it returns, and have a resync make the copies
	// equal; md records a bad block on the member instead.
	Unsynced func(sector uint64, sectors uint32)

	parked, parkedSpare  []uint16 // requests the barrier turned away
	retrying, retryAgain bool     // RetryParked is running; it was asked again meanwhile
}

// NewExecutor makes an executor for depth requests of up to maxBytes each.
func NewExecutor(arr *Array, be Backend, depth, maxBytes int) *Executor {
	e := &Executor{arr: arr, be: be, reqs: make([]request, depth), RetryUnit: 8}
	e.bal.init(arr.Geo)
	n := arr.MaxPlanIOs(maxBytes)
	for i := range e.reqs {
		// Room for the plan plus a few retries and repairs; error paths that
		// need more grow the slices (kept for the tag afterwards).
		e.reqs[i].ios = make([]MemberIO, 0, 4*n+4*MaxCopies)
		e.reqs[i].into = make([][]byte, 0, 4*n+4*MaxCopies)
		e.reqs[i].failed = make([]bool, 0, 4*n+4*MaxCopies)
		e.reqs[i].done = make([]bool, 0, 4*n+4*MaxCopies)
		e.reqs[i].hung = make([]bool, 0, 4*n+4*MaxCopies)
		e.reqs[i].times = make([]time.Duration, 0, 4*n+4*MaxCopies)
	}
	e.persistGate.init(arr.State().Gen, depth)
	e.parked = make([]uint16, 0, depth)
	e.parkedSpare = make([]uint16, 0, depth)
	return e
}

// Start begins request tag. buf holds the data of a write and receives the
// data of a read (len(buf) >= sectors*512 for reads and writes).
func (e *Executor) Start(tag uint16, op ReqOp, sector uint64, sectors uint32, fua bool, buf []byte) {
	r := &e.reqs[tag]
	if r.active {
		panic(fmt.Sprintf("engine: request %d started twice", tag))
	}
	*r = request{op: op, sector: sector, sectors: sectors, fua: fua, buf: buf, ios: r.ios[:0], into: r.into[:0], failed: r.failed[:0],
		done: r.done[:0], hung: r.hung[:0], times: r.times[:0], seq: e.nextSeq(tag, r.seq), active: true}
	// A flush has no range: the block layer's flush requests carry sector
	// (sector_t)-1.
	if op != ReqFlush && (sector >= e.arr.Geo.ArraySectors() || uint64(sectors) > e.arr.Geo.ArraySectors()-sector) {
		e.finish(tag, fmt.Errorf("request beyond the end of the array: %w", errBeyondEnd))
		return
	}
	if op != ReqFlush && sectors == 0 {
		// Nothing to read or write (the block layer sends none; a
		// request that plans no member operation would wait for good).
		e.finish(tag, nil)
		return
	}
	if op != ReqRead && e.arr.Broken() {
		// A raid0 a member's failed write broke (see memberFailed): the
		// writes acknowledged before, in that member's cache, may be
		// lost, and a later flush must not report them durable.
		e.finish(tag, fmt.Errorf("raid0 array broken by a member's failed write or flush: %w", ErrNoCopy))
		return
	}
	if op == ReqWrite || op == ReqDiscard || op == ReqWriteZeroes {
		e.admit(tag)
		return
	}
	if op == ReqRead && e.Barrier != nil && e.unsynced(sector, sectors) {
		// A read of a range awaiting resync answers from the chosen copy,
		// and a sync step of the range writes the copies with what it read
		// from it: the read goes through the barrier like a write, so that
		// it comes before or after a step, never during one (a failure of
		// the chosen copy would make it answer other data than the step
		// then writes).
		e.admit(tag)
		return
	}
	e.plan(tag)
}

// givenUp is an operation given up after the member timeout.
type givenUp struct {
	tag uint16
	id  OpID
}

// nextSeq is the OpID sequence of tag's next request: the one after seq,
// but none an operation of tag given up and still out carries. The
// sequence is 16 bits: a member that never answers (no timeout of its
// own) keeps its given-up operation out while the tag serves 65536 more
// requests, and its late result must still be told from a live one (else
// it completes that one's operation, with other data, or early).
func (e *Executor) nextSeq(tag uint16, seq uint16) uint16 { return e.given.nextSeq(tag, seq) }

// givenUps are an executor's operations given up and not come back.
type givenUps []givenUp

// nextSeq is the OpID sequence after seq for tag that no operation of
// tag in g carries.
func (g givenUps) nextSeq(tag uint16, seq uint16) uint16 {
	seq++
	for i := 0; i < len(g); i++ {
		if g[i].tag == tag && g[i].id.seq() == seq {
			seq++
			i = -1 // look again from the start
		}
	}
	return seq
}

// returned drops operation id of tag from g (it came back).
func (g *givenUps) returned(tag uint16, id OpID) {
	for i, x := range *g {
		if x.tag == tag && x.id == id {
			*g = append((*g)[:i], (*g)[i+1:]...)
			return
		}
	}
}

// returned forgets operation id of tag, given up, now that it came back.
func (e *Executor) returned(tag uint16, id OpID) { e.given.returned(tag, id) }

// admit passes a write through the barrier and the bitmap, then plans it;
// a write held by either is resumed later from the same point. A read
// (Start says which) passes the barrier only.
func (e *Executor) admit(tag uint16) {
	r := &e.reqs[tag]
	write := r.op != ReqRead
	if e.Barrier != nil && !r.entered {
		if !e.Barrier.Enter(r.sector, r.sectors) {
			e.parked = append(e.parked, tag)
			return
		}
		r.entered = true
	}
	if write && e.Intent != nil && !r.started {
		r.first, r.last = e.Intent.Regions(r.sector, uint64(r.sectors))
		r.started = true
		if !e.Intent.StartWrite(r.first, r.last, bitmap.Waiter(uint64(e.Token)<<32|uint64(tag))) {
			r.waiting = true
			if e.Now != nil {
				r.waitSince = e.Now()
			}
			return
		}
	}
	e.plan(tag)
}

// Resume continues write tag whose bitmap token was released (its regions
// are durably dirty now).
func (e *Executor) Resume(tag uint16) {
	r := &e.reqs[tag]
	if !r.active || !r.waiting {
		panic(fmt.Sprintf("engine: resume of request %d that is not waiting for the bitmap", tag))
	}
	r.waiting = false
	if e.Now != nil && e.Waited != nil {
		e.Waited(e.Now() - r.waitSince)
	}
	e.plan(tag)
}

// ResumeFailed finishes write tag, whose bitmap token came back failed
// (its regions could not be made dirty on every member in sync), with err:
// it was never issued.
func (e *Executor) ResumeFailed(tag uint16, err error) {
	r := &e.reqs[tag]
	if !r.active || !r.waiting {
		panic(fmt.Sprintf("engine: failed resume of request %d that is not waiting for the bitmap", tag))
	}
	r.waiting = false
	e.finish(tag, err)
}

// RetryParked retries the requests the barrier turned away (after a sync
// step lowered it).
func (e *Executor) RetryParked() {
	if e.retrying {
		// Called again while admitting: go round again.
		e.retryAgain = true
		return
	}
	e.retrying = true
	for len(e.parked) > 0 {
		e.retryAgain = false
		old := e.parked
		e.parked = e.parkedSpare[:0]
		for _, tag := range old {
			e.admit(tag)
		}
		e.parkedSpare = old[:0]
		if !e.retryAgain {
			break
		}
	}
	e.retrying = false
}

// Parked reports how many requests wait for the barrier.
func (e *Executor) Parked() int { return len(e.parked) }

// unsynced reports whether the copies of the range may differ: a region
// of it needs resync (Intent), or, without a bitmap, it reaches past
// ResyncFrom.
func (e *Executor) unsynced(sector uint64, sectors uint32) bool {
	if e.Intent != nil {
		return e.needsSync(sector, sectors)
	}
	return e.ResyncFrom != nil && sector+uint64(sectors) > e.ResyncFrom.Load()
}

// needsSync reports whether some region of the range needs resync.
func (e *Executor) needsSync(sector uint64, sectors uint32) bool {
	first, last := e.Intent.Regions(sector, uint64(sectors))
	for r := first; r <= last; r++ {
		if e.Intent.CopiesDiffer(r) {
			return true
		}
	}
	return false
}

// plan plans and submits request tag from the current array state.
func (e *Executor) plan(tag uint16) {
	r := &e.reqs[tag]
	sector, sectors, fua := r.sector, r.sectors, r.fua
	st := e.arr.State()
	var err error
	switch r.op {
	case ReqRead:
		var bal Balancer = &e.bal
		if e.unsynced(sector, sectors) {
			bal = LowestMember{} // the copy resync copies from
		}
		if e.Now != nil {
			r.sent = e.Now()
			e.bal.Tick(r.sent)
		}
		r.ios, err = e.arr.PlanRead(&e.sc, st, sector, sectors, 0, 0, bal, r.ios)
	case ReqWrite:
		r.ios, err = e.arr.PlanWrite(&e.sc, st, IOWrite, sector, sectors, fua, r.ios)
	case ReqDiscard:
		r.ios, err = e.arr.PlanWrite(&e.sc, st, IODiscard, sector, sectors, false, r.ios)
	case ReqWriteZeroes:
		r.ios, err = e.arr.PlanWrite(&e.sc, st, IOWriteZeroes, sector, sectors, false, r.ios)
	case ReqFlush:
		r.ios, err = e.arr.PlanFlush(st, r.ios)
	default:
		err = errUnsupported
	}
	if err == nil && len(r.ios) > MaxRequestOps {
		// (Geometry.MaxPlanSectors bounds the device's requests below
		// this: a result past the index's 16 bits would be taken for
		// another operation's, and the request never end.)
		err = fmt.Errorf("%d sectors need %d member operations, more than %d: %w", sectors, len(r.ios), MaxRequestOps, errUnsupported)
	}
	if err != nil {
		e.finish(tag, err)
		return
	}
	if st.DropGen > e.persisted && (r.op != ReqRead || e.unsynced(sector, sectors)) {
		// Planned around a member failure that may not be durable yet:
		// acknowledged only once it is (see ArrayState.DropGen). A FLUSH
		// too: what it makes durable skipped that member, which a power
		// loss before the record would bring back as in sync. And a read
		// of a range awaiting resync: it answers from another copy than
		// the one the member held, which a crash before the record would
		// bring back as the chosen copy, so the answer would change.
		r.needGen = max(r.needGen, st.DropGen)
	}
	r.planned = len(r.ios)
	if r.needGen > e.persisted && r.op != ReqRead && r.op != ReqFlush {
		// A write planned around a member failure that is not durable yet
		// is not issued until it is: issued, it would put data on the
		// other copies only, and were the record then never made (no
		// member takes it) a crash would bring the dropped member back
		// in sync, its copy different where no bitmap region may say so
		// (the bitmap writes may have failed too). Rare: the queue that
		// saw the failure records it at once.
		e.holding = append(e.holding, tag)
		e.be.Persist(e.arr.State())
		return
	}
	e.submitFrom(tag, 0)
}

var (
	errBeyondEnd   = errors.New("out of range")
	errUnsupported = errors.New("unsupported request")
)

func (e *Executor) submitFrom(tag uint16, first int) {
	r := &e.reqs[tag]
	if r.rebuffer && first < len(r.ios) {
		// A read given up may still land in buf: nothing more is read
		// into it (its range's retries least of all).
		r.rebuffer = false
		r.buf = e.be.Rebuffer(tag)
	}
	for len(r.failed) < len(r.ios) {
		r.failed = append(r.failed, false)
		r.done = append(r.done, false)
		r.hung = append(r.hung, false)
		r.into = append(r.into, nil)
	}
	if e.Now != nil {
		now := e.Now()
		for len(r.times) < len(r.ios) {
			r.times = append(r.times, now)
		}
	}
	// A backend may complete an operation from within Submit; a failed
	// read then retries, appending and submitting its own operations:
	// those past end are not this call's.
	end := len(r.ios)
	r.pending += end - first
	for i := first; i < end; i++ {
		io := r.ios[i]
		e.bal.Inflight[io.Member] += int64(io.Sectors)
		var data []byte
		if io.Kind == IORead || io.Kind == IOWrite {
			data = r.buf[io.BufOff : io.BufOff+io.Sectors<<9]
		}
		r.into[i] = data
		e.be.Submit(tag, opID(r.seq, i), io, data)
	}
}

// Done reports the result of member operation id of request tag.
func (e *Executor) Done(tag uint16, id OpID, res int32) {
	r := &e.reqs[tag]
	op := id.Index()
	if !r.active || id.seq() != r.seq || op >= len(r.ios) || r.done[op] {
		e.returned(tag, id)
		e.be.Stale(tag, id) // abandoned: its request went on without it
		return
	}
	r.done[op] = true
	io := r.ios[op]
	e.bal.Inflight[io.Member] -= int64(io.Sectors)
	if e.OpDone != nil && op < len(r.times) {
		e.OpDone(tag, id, io.Member, io.Kind, io.Sectors, res, e.Now()-r.times[op])
	}
	want := int32(0)
	if io.Kind == IORead || io.Kind == IOWrite {
		want = int32(io.Sectors) << 9
	}
	if io.Kind == IORead && res == want && e.Now != nil && op < r.planned {
		e.bal.Complete(int(io.Member), io.Sectors, r.sent, e.Now())
	}
	// A read waited for past the timeout (a zero-copy request's pages)
	// whose member was failed then (not one kept as the last copy, still
	// the chosen one): in a range awaiting resync another
	// copy is the chosen one since, and reads answered from it; this
	// late answer, the failed copy's, may differ. Read again from the
	// chosen copy, as a read given up is.
	lateHung := res == want && io.Kind == IORead && op < len(r.hung) && r.hung[op] &&
		e.arr.State().Members[io.Member].State != MemberActive &&
		e.unsynced(r.sector+uint64(io.BufOff>>9), io.Sectors)
	if lateHung {
		r.failed[op] = true
		io.Avoid |= 1 << uint(io.Member)
		e.retryRead(tag, r, io, false)
	} else if io.Kind != IORead && e.be.Departed(tag, id, io) {
		// Its device left the role while it ran: no copy, no blame. The
		// write is acknowledged only once the role's drop is durable,
		// as for a write blamed on its member (memberFailed): a device
		// is put in a role that is faulty or missing in memory, which
		// the superblocks may not say yet.
		r.failed[op] = true
		r.needGen = max(r.needGen, e.arr.State().DropGen)
	} else if res != want && io.Kind == IORead && e.be.Departed(tag, id, io) {
		r.failed[op] = true
		io.Avoid |= 1 << uint(io.Member)
		e.retryRead(tag, r, io, false)
	} else if res != want && Refused(io.Kind, res) {
		// The member cannot do it: no member failure. A discard is
		// advisory (md ignores discard errors); a write-zeroes fails the
		// request with EOPNOTSUPP, which makes the kernel write zeroes.
		r.unsupported = r.unsupported || io.Kind == IOWriteZeroes
		r.refused = true
	} else if res != want && io.Kind == IODiscard {
		// Any other discard error (EIO) fails no member either, as
		// md's raid1/raid10 ignore discard errors (no md_error): the
		// member holds what it held, or what a discard would leave,
		// and failing it would run the array degraded, and rebuild
		// the whole member, for an fstrim. Where another copy took it
		// the copies may differ: the range is resynced (refused and
		// applied: complete). Where none did (the last copy, raid0's
		// only one) the request fails with EIO (writeOutcome), and
		// raid0 is not broken: nothing written was lost.
		r.failed[op] = true
		r.refused = true
		r.discardErr = true
		e.tellMemberError(r, io, res)
	} else if res != want {
		r.failed[op] = true
		e.tellMemberError(r, io, res)
		e.memberFailed(tag, id, r, io, res == -errnoAgain)
	} else if io.Kind == IODiscard || io.Kind == IOWriteZeroes {
		r.applied = true
	} else if io.Kind == IORead {
		if d := r.into[op]; len(d) > 0 && &d[0] != &r.buf[io.BufOff] {
			// Read into a buffer the request has left since (Rebuffer),
			// which copied what that one held then, not this: its range
			// is this operation's alone (no other read of it is out, and
			// none given up), so it is copied over.
			copy(r.buf[io.BufOff:io.BufOff+io.Sectors<<9], d)
		}
	}
	if res == want && io.Kind == IORead && op >= r.planned && e.ReadRepair != nil && !lateHung {
		// A retried read succeeded: the copies that failed need a rewrite.
		if bad := (io.Avoid | io.Deprio) &^ io.Busy &^ (1 << uint(io.Member)); bad != 0 {
			e.ReadRepair(r.sector+uint64(io.BufOff>>9), io.Sectors, bad, io.Member)
		}
	}
	r.pending--
	if r.pending == 0 {
		e.complete(tag, r)
	}
}

// tellMemberError tells MemberError of a failed member operation: of a
// read, once per member and request, whether the read as planned or one
// of its retries failed there, by error or by timeout (one failed read,
// however many of its retry units fail again). A member too busy to take
// a read (EAGAIN) did not fail it: an error of a later retry there is
// still told.
func (e *Executor) tellMemberError(r *request, io MemberIO, res int32) {
	if e.MemberError == nil {
		return
	}
	if io.Kind == IORead {
		bit := uint64(1) << uint(io.Member)
		if r.told&bit != 0 {
			return
		}
		if res != -errnoAgain {
			r.told |= bit
		}
	}
	e.MemberError(int(io.Member), io.Kind, res)
}

// Tick gives up member operations older than MemberTimeout (queue
// thread, every second or so): their member is failed and their requests
// carry on with the other copies, as after an I/O error.
func (e *Executor) Tick() {
	if e.MemberTimeout <= 0 || e.Now == nil {
		return
	}
	now := e.Now()
	for t := range e.reqs {
		r := &e.reqs[t]
		if !r.active || r.pending == 0 {
			continue
		}
		for i := 0; i < len(r.ios) && i < len(r.times); i++ {
			if r.done[i] || now-r.times[i] < e.MemberTimeout {
				continue
			}
			io := r.ios[i]
			departed := e.be.Departed(uint16(t), opID(r.seq, i), io)
			if !e.be.Abandon(uint16(t), opID(r.seq, i), io) {
				if io.Kind == IORead && !r.hung[i] && e.arr.Geo.Level != Level0 && !departed {
					// It is waited for (the backend cannot give it up:
					// a zero-copy request's pages, or no spare buffer),
					// but its member is failed now, as for one given up,
					// so that later reads leave it alone (never the last
					// copy: FailRedundant keeps that one).
					r.hung[i] = true
					e.tellMemberError(r, io, -int32(errnoTimedOut))
					e.failBlamed(uint16(t), opID(r.seq, i), io)
				}
				continue
			}
			r.done[i], r.failed[i] = true, true
			e.given = append(e.given, givenUp{tag: uint16(t), id: opID(r.seq, i)})
			if e.OpDone != nil {
				// Its result is told now (its late one is dropped).
				e.OpDone(uint16(t), opID(r.seq, i), io.Member, io.Kind, io.Sectors, -int32(errnoTimedOut), now-r.times[i])
			}
			if io.Kind == IORead {
				// It may still land in the buffer it was given.
				r.rebuffer = true
			}
			e.bal.Inflight[io.Member] -= int64(io.Sectors)
			if departed {
				// Its device left the role: given up without blaming the
				// role's device (see Backend.Departed).
				if io.Kind == IORead {
					io.Avoid |= 1 << uint(io.Member)
					e.retryRead(uint16(t), r, io, false)
				} else {
					r.needGen = max(r.needGen, e.arr.State().DropGen) // (see Done)
				}
				r.pending--
				if r.pending == 0 {
					e.complete(uint16(t), r)
					break
				}
				continue
			}
			e.tellMemberError(r, io, -int32(errnoTimedOut))
			// The member is failed whatever the operation (raid0: the
			// array is broken instead, a write's: see memberFailed),
			// unless it holds
			// the last in-sync copy of some data (md never fails that one:
			// the request fails instead, and so does each later one that
			// times out on it). A read retried elsewhere never goes back
			// to it, failed or kept: it would wait out the timeout again,
			// block by block.
			io.Avoid |= 1 << uint(io.Member)
			if io.Kind == IORead && e.arr.Geo.Level != Level0 {
				e.failBlamed(uint16(t), opID(r.seq, i), io)
			}
			e.memberFailed(uint16(t), opID(r.seq, i), r, io, true) // a write: failBlamed there
			r.pending--
			if r.pending == 0 {
				e.complete(uint16(t), r)
				break
			}
		}
	}
}

// Errnos the executor reads or reports as numbers: ETIMEDOUT, EAGAIN (a
// member busy: Backend.Submit), and EOPNOTSUPP and EINVAL (what a member
// without discard or write-zeroes support answers).
const (
	errnoTimedOut = 110
	errnoAgain    = 11
	errnoNotSupp  = 95
	errnoInval    = 22
)

// Refused reports whether res, a member operation's result, is a member
// refusing a DISCARD or WRITE_ZEROES it cannot do (EOPNOTSUPP, EINVAL: a
// file on tmpfs, a disk without the command): advisory operations, so no
// failure of the member, nor an error of it to count.
func Refused(kind IOKind, res int32) bool {
	return (kind == IODiscard || kind == IOWriteZeroes) && (res == -errnoNotSupp || res == -errnoInval)
}

// ErrNotSupported fails a WRITE_ZEROES some member cannot do: EOPNOTSUPP
// makes the kernel's blkdev_issue_zeroout write zeroes instead.
var ErrNotSupported = fmt.Errorf("write zeroes: %w", syscall.EOPNOTSUPP)

// ErrChosenCopyBusy fails a read of a range awaiting resync whose chosen
// copy (the one the resync copies from) did not answer or could not take
// it while its member stays in sync.
var ErrChosenCopyBusy = fmt.Errorf("the copy a range awaiting resync is read from is busy: %w", ErrNoCopy)

// ErrLastCopy fails a request whose write, flush or discard failed on a
// member that holds the last in-sync copy of some data: that member is
// not failed (the array would be), the request gets EIO.
var ErrLastCopy = fmt.Errorf("a member holding the last in-sync copy failed the request: %w", ErrNoCopy)

// failBlamed fails the member operation id of request tag went to
// (FailRedundant: never the last in-sync copy), unless its device has left
// the role (Backend.Departed), which it reports: the role's state
// generation is read before the look at its device and the failure is
// made only while it is unchanged (Array.FailRedundantIf), so a device
// put in the role meanwhile (replace, a spare) is never failed for an
// operation of its predecessor.
func (e *Executor) failBlamed(tag uint16, id OpID, io MemberIO) (st *ArrayState, out, departed bool) {
	return failBlamed(e.arr, e.be, tag, id, io)
}

// failBlamed is Executor.failBlamed for any executor of arr on be.
func failBlamed(arr *Array, be Backend, tag uint16, id OpID, io MemberIO) (st *ArrayState, out, departed bool) {
	for {
		since := arr.State().Members[io.Member].Since
		if be.Departed(tag, id, io) {
			return arr.State(), true, true
		}
		st, _, out, stale := arr.FailRedundantIf(int(io.Member), since)
		if !stale {
			return st, out, false
		}
	}
}

// memberFailed handles a failed member operation: a read is retried on
// another copy; a failed write, flush or discard marks the member faulty,
// unless it holds the last in-sync copy of some data (raid1/10: the
// request fails instead).
//
// busy says the member did not answer (a timeout) or could not take the
// operation (-EAGAIN), rather than failing it.
func (e *Executor) memberFailed(tag uint16, id OpID, r *request, io MemberIO, busy bool) {
	if io.Kind == IORead {
		e.retryRead(tag, r, io, busy)
		return
	}
	if e.arr.Geo.Level == Level0 {
		// Every member holds the only copy of its data: the request
		// fails (writeOutcome: ErrNoCopy) and the array is broken in
		// memory (MarkBroken: later writes and flushes fail), as md's
		// MD_BROKEN; no member failure is recorded (md's raid0 records
		// none), so that a transient error does not leave an array the
		// next assembly refuses without --force.
		e.arr.MarkBroken()
		return
	}
	st, out, departed := e.failBlamed(tag, id, io)
	if departed {
		// Its device left the role since the caller looked: as a
		// departed write (Done), no copy and no blame, acknowledged once
		// the role's drop is durable.
		r.needGen = max(r.needGen, st.DropGen)
		return
	}
	if !out {
		if !r.lastCopy && e.Unsynced != nil && r.op != ReqFlush && r.wroteElsewhere(io.Member) {
			e.Unsynced(r.sector, r.sectors)
		}
		r.lastCopy = true
		return
	}
	r.needGen = max(r.needGen, st.Gen)
}

// wroteElsewhere reports whether r writes to a member other than m: only
// then can a write that m failed leave copies that differ (a degraded
// raid1's last copy holds the only one).
func (r *request) wroteElsewhere(m int32) bool {
	for _, io := range r.ios {
		if io.Member != m && io.Kind != IOFlush {
			return true
		}
	}
	return false
}

// retryRead re-plans a failed read. A failure of a range larger than one
// retry unit does not say which block is bad, so the range is re-read
// block by block, preferring other members but not ruling the failed one
// out; a failed single block rules its member out for that block.
//
// In a range awaiting resync the copies may differ and reads answer from
// the chosen copy (LowestMember): the blocks are re-read from it first,
// not from other members, so that only a block it cannot read comes from
// another copy (and is reported for repair), and answers stay stable.
// When the chosen copy is busy (busy: it did not answer, or could not take
// the read) and still in sync, the read fails with ErrChosenCopyBusy: the
// chosen copy holds the data the range will have once synced, and another
// copy's answer now would change again when it answers. (A copy read
// after the chosen one failed a block is passed over when busy, as
// before.)
func (e *Executor) retryRead(tag uint16, r *request, io MemberIO, busy bool) {
	bit := uint64(1) << uint(io.Member)
	first := len(r.ios)
	st := e.arr.State()
	unit := max(e.RetryUnit, 1)
	var bal Balancer = &e.bal
	stable := e.unsynced(r.sector+uint64(io.BufOff>>9), io.Sectors)
	if stable {
		bal = LowestMember{}
		if busy && io.Avoid&^bit == 0 && st.Members[io.Member].State == MemberActive {
			// (No member ruled out before: io went to the chosen copy.)
			if r.err == nil {
				r.err = ErrChosenCopyBusy
			}
			return
		}
	}
	var err error
	for done := uint32(0); done < io.Sectors && err == nil; {
		n := io.Sectors - done
		avoid, deprio := io.Avoid, io.Deprio|bit
		if stable {
			deprio = io.Deprio
		}
		if io.Sectors <= unit {
			avoid, deprio = io.Avoid|bit, io.Deprio
		} else {
			// Blocks aligned to the unit in array sectors.
			s := r.sector + uint64(io.BufOff>>9) + uint64(done)
			n = min(n, unit-uint32(s%uint64(unit)))
		}
		sector := r.sector + uint64(io.BufOff>>9) + uint64(done)
		start := len(r.ios)
		r.ios, err = e.arr.PlanRead(&e.sc, st, sector, n, avoid, deprio, bal, r.ios)
		busyMask := io.Busy &^ bit
		if busy {
			busyMask |= bit
		}
		for i := start; i < len(r.ios); i++ {
			r.ios[i].BufOff += io.BufOff + done<<9 // PlanRead counts from its first sector
			r.ios[i].Busy = busyMask
		}
		done += n
	}
	if err != nil {
		r.ios = r.ios[:first]
		if r.err == nil {
			r.err = err
		}
		return
	}
	if stable && st.DropGen > e.persisted {
		// Served by another copy after a failure not yet durable (see
		// plan).
		r.needGen = max(r.needGen, st.DropGen)
	}
	e.submitFrom(tag, first)
}

// complete decides the outcome of a request whose member operations have
// all finished.
func (e *Executor) complete(tag uint16, r *request) {
	if r.err == nil && r.op != ReqRead {
		r.err = e.writeOutcome(r)
	}
	if r.op == ReqWriteZeroes && r.fua && !r.zeroesFlushed && r.err == nil && !r.lastCopy && !r.unsupported {
		// FUA: durable on every copy when acknowledged. A member zeroes
		// with no FUA (fallocate), so each member that zeroed is
		// flushed now, as the block layer turns FUA into a flush after
		// the write on a device without it; a failed flush fails its
		// member as any flush does (memberFailed).
		r.zeroesFlushed = true
		first := len(r.ios)
		var seen uint64
		for i := 0; i < first; i++ {
			io := r.ios[i]
			if io.Kind == IOWriteZeroes && !r.failed[i] && seen&(1<<uint(io.Member)) == 0 {
				seen |= 1 << uint(io.Member)
				r.ios = append(r.ios, MemberIO{Member: io.Member, Kind: IOFlush})
			}
		}
		if len(r.ios) > first {
			e.submitFrom(tag, first)
			return
		}
	}
	if r.err == nil && r.lastCopy {
		r.err = ErrLastCopy
	}
	if r.err == nil && r.unsupported {
		r.err = ErrNotSupported
	}
	if (r.refused && r.applied || r.discardErr) && e.Unsynced != nil && e.arr.Geo.Level != Level0 {
		// Some copies were discarded or zeroed and others were not (all
		// members advertised the command, one refused it anyway): the
		// copies differ, and reads of the range must not depend on which
		// copy answers. Marked while the request is still started in the
		// bitmap, so a crash before the resync resyncs the range too. (A
		// write-zeroes fails with EOPNOTSUPP and the kernel then writes
		// zeroes to every copy; the resync is then only redundant.) A
		// copy that failed a discard may have carried out part of it:
		// marked too, whether or not another copy took it.
		e.Unsynced(r.sector, r.sectors)
	}
	if r.needGen > e.persisted {
		e.waiting = append(e.waiting, tag)
		e.be.Persist(e.arr.State())
		return
	}
	e.finish(tag, r.err)
}

// writeOutcome checks that every piece of a write reached at least one
// member (a flush: every member still in use).
func (e *Executor) writeOutcome(r *request) error {
	if r.discardErr && !r.applied {
		// One copy failed the discard and the others refused it (a
		// refusal covers nothing): no copy took it, and the failing
		// one may hold what a discard leaves.
		return fmt.Errorf("array sectors %d+%d: discard: %w", r.sector, r.sectors, ErrNoCopy)
	}
	for i, io := range r.ios {
		if !r.failed[i] {
			continue
		}
		if io.Kind == IOFlush {
			if e.arr.Geo.Level == Level0 {
				// The member held the only copy of its chunks: what it
				// had in its cache is not durable.
				return fmt.Errorf("raid0 member %d failed the flush: %w", io.Member, ErrNoCopy)
			}
			continue // the member is faulty now; the others hold copies of its data, flushed
		}
		covered := false
		for j, o := range r.ios {
			if j != i && !r.failed[j] && o.Kind == io.Kind && o.BufOff == io.BufOff {
				covered = true
				break
			}
		}
		if !covered {
			return fmt.Errorf("array sectors %d+%d: %w", r.sector+uint64(io.BufOff>>9), io.Sectors, ErrNoCopy)
		}
	}
	if r.op == ReqFlush {
		for i := range r.ios {
			if !r.failed[i] {
				return nil
			}
		}
		return ErrNoCopy
	}
	return nil
}

func (e *Executor) finish(tag uint16, err error) {
	r := &e.reqs[tag]
	r.active = false
	if r.started {
		r.started = false
		e.Intent.EndWrite(r.first, r.last)
	}
	if r.entered {
		r.entered = false
		e.Barrier.Exit(r.sector, r.sectors)
	}
	e.be.Complete(tag, err)
}

// Persisted tells the executor that state generation gen is durable;
// requests that waited for it are completed.
func (e *Executor) Persisted(gen uint64) { e.persistedTo(gen, e) }

func (e *Executor) gateReq(tag uint16) (uint64, error) {
	r := &e.reqs[tag]
	return r.needGen, r.err
}

// replan plans held write tag again from the state now: a member may
// have failed meanwhile (nothing of the old plan was issued).
func (e *Executor) replan(tag uint16) {
	r := &e.reqs[tag]
	r.ios, r.into, r.failed, r.done, r.hung, r.times = r.ios[:0], r.into[:0], r.failed[:0], r.done[:0], r.hung[:0], r.times[:0]
	e.plan(tag)
}

// Inflight reports sectors in flight per member on this queue.
func (e *Executor) Inflight() []int64 { return e.bal.Inflight }

// Balance returns this queue's read balancer, to configure (WriteMostly,
// Window, ProbeAfter) before the first request.
func (e *Executor) Balance() *Balance { return &e.bal }

// PersistFailed finishes every request waiting for a persist with err: the
// new member state could not be recorded, so they are not acknowledged as
// written; writes held before issue (see plan) fail unissued.
func (e *Executor) PersistFailed(err error) { e.failAll(e, err) }
