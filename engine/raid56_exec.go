package engine

// The parity request executor: raid5 and raid6 requests of one ublk queue.
//
// Contract (as Executor's, whose Backend, MemberIO, OpID, ReqOp and
// member-state conventions it shares): one ParityExecutor per queue
// thread, every method called on that thread, no locks of its own and no
// allocation per request after construction (but when a stripe has two
// chunks to rebuild, or one without P: see below). Start
// begins a request; each member operation goes to Backend.Submit with an
// OpID and comes back through Done; Backend.Complete is called exactly
// once per request, with nil or an error. A request runs in phases:
//
//  1. Lock: the stripes it touches, in the StripeLock shared by every
//     queue of the array (all or none, never blocking); a read only when
//     its plan has a chunk to reconstruct (step 2 first, then this). A
//     request that does not get them is parked; the queue's wake-up (its
//     bit) must call RetryParked.
//  2. Plan: each stripe with PlanStripeWrite / PlanStripeRead against the
//     array state loaded now. A write planned around a member failure
//     not yet durable (ArrayState.DropGen) is held, unissued, until
//     Persisted says it is (as Executor holds one), then planned again.
//  3. Pre-read what the plans read, into the request's stripe buffer
//     (taken from the queue's bounded pool, of the size the plan needs;
//     at the bound the request waits for one, holding its stripes, and
//     the queue's Wake must lead to RetryParked: raid56_slab.go; old
//     data and parity never go into the request's own pages; data
//     wanted by a read and data written come from and go to them
//     directly).
//  4. Compute: RMW adds each written chunk's change to the old parity
//     (Parity.Update), RCW computes it from the whole stripe's data
//     (Parity.Compute), Reconstruct rebuilds the missing old data first
//     (one missing data chunk with P: XOR; else Parity.ReconstructData).
//  5. With the write-hole log (EnableLog, raid56_logexec.go): an entry
//     per segment whose parity is written, durable on the stripe's parity
//     members before anything else of the write is issued.
//  6. Write data and parity (FUA as asked; always, with the log). A
//     read's missing chunks are rebuilt from the others instead.
//  7. Unlock, complete.
//
// A failed member operation fails its member (Array.FailRedundant), unless
// that would leave some stripe with more members lost than its parity
// covers (the last copy: md fails the request instead of the array; the
// request gets ErrLastCopy, EIO). A failed pre-read, or a failed read of
// a read request, plans the request again from the new state, so that
// the lost chunk is reconstructed from the others (and the read error of
// one data chunk is answered so). With ReadRepair set, a read that failed
// with an error (not a timeout) fails no member: as md, the request reads
// around that member (it alone) and ReadRepair is told to rewrite the
// rows from the others; but not a write's pre-read of a data chunk it
// does not write in a stripe whose parity is untrusted (the rows rebuilt
// from that parity are not the member's: see untrustedAround), whose
// member fails. A failed write leaves its chunk to the
// parity written with it; a write that failed on a member kept heals its
// stripes from its write-hole log entries before it fails (raid56_heal.go:
// otherwise the parity written with it, or the data, disagrees with what
// the kept member holds, and a lost chunk rebuilt there reads as what
// nobody wrote). A request that failed a member is acknowledged
// only once the new state is durable: Backend.Persist, then Persisted
// with its generation (PersistFailed fails the waiting requests).
//
// A member operation older than MemberTimeout is given up (Tick), as by
// Executor: it counts as failed (its member fails, but not the last copy)
// and the buffers it may still use are kept from the request's later
// work until it comes back: the stripe buffer it was given is lent, out
// of the pool's count (the request's next plan takes another), and a read
// given up in the request's pages makes the next plan take other pages
// (Backend.Rebuffer). An operation whose device left its role meanwhile
// blames nobody (Backend.Departed).
//
// FLUSH goes to every writable member, as Executor's. DISCARD and
// WRITE_ZEROES are refused with ErrParityUnsupported (EOPNOTSUPP: the
// device must not advertise them yet; the kernel's zeroout falls back to
// writing zeroes).
//
// Writes are gated by the write-intent bitmap (Intent) as Executor's:
// StartWrite before the stripe lock, nothing issued until the regions are
// durably dirty, EndWrite at the end.
//
// Not done yet: the write barrier (no WriteBarrier gating: no resync for
// parity exists to need it); per-region parity trust from the bitmap
// (Untrusted is the hook: the caller says which stripes have garbage
// parity; see docs/raid56.md on why a region's state alone does not say
// it for a stripe); a persistent record of a stripe a heal could not
// make consistent (md's bad block; ErrStripeUnhealed and a metric are all
// there is); the stripe cache (chunks read for one request are not
// kept for the next); a stripe that a rebuilding member could still
// reconstruct is not reconstructed when FailRedundant refuses (it counts
// rebuilding members as lost); -EAGAIN is an error like any other; metrics. Reconstruction
// of two missing chunks, or of one without P (raid6 with P lost too),
// allocates: klauspost/reedsolomon's decoder makes a few small slices per
// call (the XOR path, one chunk rebuilt from P, does not).

import (
	"crypto/subtle"
	"fmt"
	"math/bits"
	"syscall"
	"time"
	"unsafe"

	"github.com/ublk-raid/ublk-raid/bitmap"
)

// ErrParityUnsupported fails DISCARD and WRITE_ZEROES on a parity array:
// not implemented yet (they would have to keep the parity right).
var ErrParityUnsupported = fmt.Errorf("raid5/6: discard and write zeroes are not supported yet: %w", syscall.EOPNOTSUPP)

type parityPhase uint8

const (
	parityIdle        parityPhase = iota
	parityIntent                  // a write waiting for its bitmap regions to be durably dirty
	parityParked                  // waiting for the stripe lock
	parityHeld                    // planned, waiting for a failure to be durable before issue
	parityReading                 // pre-reads (or a read's reads) in flight
	parityLogWait                 // a write's log entries waiting for ring space
	parityLogging                 // a write's log entries in flight
	parityWriting                 // data and parity writes in flight
	parityFlushing                // member flushes in flight
	parityWaiting                 // finished, waiting for Persisted
	parityHealReading             // a write failed on a kept member: its rows read back (raid56_heal.go)
	parityHealWriting             // and its stripes' parity made theirs again
	paritySlabWait                // planned, waiting for a stripe buffer (raid56_slab.go)
)

// paritySeg is one planned segment of one stripe: rows [lo, hi) of its
// chunks, with the buffers its plan reads into and writes from.
type paritySeg struct {
	stripe uint64
	m      StripeMap
	lo, hi uint64
	mode   ParityWriteMode // writes only
	// want: the data members written (a write) or asked for (a read);
	// reads, missing, writes as StripeSegment / StripeReadSegment.
	want, reads, missing, writes uint64
	// chunk[m]: member m's rows, read or rebuilt (stripe buffer, or the
	// request's pages for data a read asked for).
	chunk [MaxMembers][]byte
	// par: P and Q to write (RMW: updated in place of the old ones).
	par [2][]byte
	// log: a write's write-hole log entry block (header, then payload:
	// ParityLogPayload), whole pages of the stripe buffer; nil: none (no
	// parity member is written). logged, written: its slot masks;
	// unlogged: its parity parts not computed (ParityLogEntry.Unlogged).
	log             []byte
	logged, written uint64
	unlogged        uint8
}

type parityReq struct {
	op      ReqOp
	sector  uint64
	sectors uint32
	fua     bool
	buf     []byte
	seq     uint16 // changes with every plan (OpID)
	phase   parityPhase
	active  bool
	locked  bool
	first   uint64 // stripes first..last
	last    uint64
	// started: a write StartWrite'd on the bitmap (Intent), regions
	// rfirst..rlast; EndWrite is due when it finishes.
	started       bool
	rfirst, rlast int
	segs          []paritySeg
	ios           []MemberIO
	data          [][]byte
	failed        []bool
	done          []bool
	times         []time.Duration // per ios entry: when it was submitted (Now)
	hung          []bool          // per ios entry: past the timeout, not given up: its member was failed
	pending       int
	anyFail       bool
	slab          []byte // the stripe buffer (the pool's, raid56_slab.go; nil: none held)
	used          int
	need          int // slabNeed of the plan
	err           error
	needGen       uint64
	// planSt: the member states the plan was made from.
	planSt *ArrayState
	// lastCopy: an operation failed on a member kept because failing it
	// would lose a stripe.
	lastCopy bool
	// rebuffer: a read into the request's pages was given up and may
	// still land there: the next plan takes another buffer first
	// (Backend.Rebuffer).
	rebuffer bool
	// avoid: members a read of this request failed on (an error, not a
	// timeout) with ReadRepair set: its later plans read around them,
	// reconstructing their chunks, and they stay in the array.
	avoid []uint64 // per stripe, from first
	// readErr: per ios entry, a read that failed with an error result.
	readErr []bool
	// logFirst: the number of the write's first write-hole log entry
	// while it holds entries (0: none); logSizes, logOffs: its entries'
	// sizes and places in the ring.
	logFirst uint64
	logSizes []int
	logOffs  []uint64
	// healFrom, healWritesFrom: the index in ios of a heal's first read
	// back, first write; healFailed: a part of it failed; healBuf: its
	// read backs' buffer.
	healFrom, healWritesFrom int
	healFailed               bool
	healBuf                  []byte
	// gaveUp: an operation of this plan was given up after the member
	// timeout.
	gaveUp bool
}

// lentSlab is a stripe buffer an operation given up after the member
// timeout may still use (a late read lands in it, a late write reads from
// it): the request took another, and this one is reused only once every
// such operation has come back.
type lentSlab struct {
	tag uint16
	op  OpID
	buf []byte
	// heal: a heal's read-back buffer (healBufs), dropped once back
	// rather than reused as a stripe buffer.
	heal bool
}

// alloc takes n bytes of the request's stripe buffer.
func (r *parityReq) alloc(n int) []byte {
	if r.used+n > len(r.slab) || strictSlabNeed && r.used+n > r.need {
		panic(fmt.Sprintf("engine: a plan takes more than its stripe buffer of %d bytes (slabNeed %d)", len(r.slab), r.need))
	}
	b := r.slab[r.used : r.used+n : r.used+n]
	r.used += n
	return b
}

// ParityExecutor runs the requests of one queue of a raid5/6 array (see
// the contract above). Single-threaded, like Executor.
type ParityExecutor struct {
	arr   *Array
	geo   ParityGeometry
	be    Backend
	lock  *StripeLock
	queue int
	par   *Parity
	reqs  []parityReq
	persistGate
	parked   []uint16 // waiting for the stripe lock
	spare    []uint16
	retrying bool
	again    bool
	wsegs    []StripeSegment
	rsegs    []StripeReadSegment
	shards   [MaxMembers + 2][]byte

	// MemberError, if set, is told of every failed member operation.
	MemberError func(member int, kind IOKind, res int32)
	// MemberReadOK, if set, is told of every member read that succeeded
	// on the device its member holds (md's raid5 resets a device's count
	// of read errors on each: its budget is for errors in a row).
	MemberReadOK func(member int)
	// ReadRepair, if set, is told of the member sectors [sector,
	// sector+sectors) of member that a read failed with an error (not a
	// timeout): the member is not failed for it, the request reads
	// around it (its chunk reconstructed from the others), and the
	// caller rewrites those rows from the others (md's read error
	// handling; a rewrite that fails fails the member). Without it, the
	// member is failed.
	ReadRepair func(member int, sector uint64, sectors uint32)
	// Untrusted, if set, reports whether stripe s's parity may be garbage
	// (never written since the array was made, or not resynced since):
	// its writes are planned with parityTrusted false (never RMW; RCW,
	// or Reconstruct when a member is lost).
	Untrusted func(stripe uint64) bool
	// Intent, if set, is the write-intent bitmap, as Executor's: a write
	// calls StartWrite on the regions of the array sectors it writes
	// before it takes its stripes, and nothing of it is planned or
	// issued until they are durably dirty (StartWrite true, or Resume
	// when the flusher hands its token, Token<<32 | tag, back;
	// ResumeFailed if they could not be made so); EndWrite when it
	// finishes, after its member writes completed and any member failure
	// it caused is durable. A write changes the parity only of the
	// stripes its sectors lie in, so a resync of a dirty region must
	// recompute every stripe the region's sectors touch. Reads and
	// flushes do not use it.
	Intent IntentLog
	// Token is this executor's high bits of bitmap tokens.
	Token uint32
	// Now and MemberTimeout, if set, give up member operations older than
	// the timeout (Tick), as Executor's.
	Now           func() time.Duration
	MemberTimeout time.Duration
	// OpDone, if set (with Now), is told of every member operation that
	// completes (log writes included), as Executor's.
	OpDone func(tag uint16, id OpID, member int32, kind IOKind, sectors uint32, res int32, latency time.Duration)

	// The write-hole log (EnableLog): the queue's ring, the array's
	// numbering, its UUID, and what asks for a checkpoint when the ring
	// is full. logWaitq: writes waiting for ring space; logOut: writes
	// holding entries, the oldest numbered logOldest.
	logRing   *ParityLogRing
	logClock  *ParityLogClock
	logUUID   [16]byte
	logWait   func()
	logWaitq  []uint16
	logOut    int
	logOldest uint64

	// healBufs[tag]: where a heal of tag's write reads back the rows of
	// data writes that failed on members kept (raid56_heal.go); made on
	// the first; one a read given up may still land in is lent (lent,
	// heal) until it comes back, and the tag takes a new one.
	healBufs [][]byte

	lent []lentSlab // stripe buffers operations given up may still use
	// slabs: the queue's stripe buffers (raid56_slab.go); slabRetry:
	// retrySlabWait is running; slabHead: the waiter it is planning (-1:
	// none).
	slabs     slabPool
	slabRetry bool
	slabHead  int
	// Wake, if set, gets the queue woken (RetryParked called) soon; it
	// is called when a stripe buffer a request waits for is given back.
	// Without it a request waiting for one is retried only when
	// RetryParked is called for another reason.
	Wake func()
	// given: operations given up whose results have not come back; no
	// plan of their tag takes their OpID sequence (as Executor's).
	given givenUps

	// Stats counts the executor's work (metrics).
	Stats ParityStats
}

// NewParityExecutor makes the executor of queue (its waiter bit in lock)
// for depth requests of up to maxBytes each, on parity array arr
// (NewParityArray). lock is shared by every queue of the array.
func NewParityExecutor(arr *Array, be Backend, lock *StripeLock, queue, depth, maxBytes int) (*ParityExecutor, error) {
	if arr.Parity == nil {
		return nil, fmt.Errorf("parity executor: not a raid5/6 array")
	}
	g := *arr.Parity
	par, err := NewParity(g.DataMembers(), g.Level == Level6)
	if err != nil {
		return nil, err
	}
	e := &ParityExecutor{arr: arr, geo: g, be: be, lock: lock, queue: queue, par: par, reqs: make([]parityReq, depth),
		healBufs: make([][]byte, depth)}
	nd := uint64(g.DataMembers())
	segs := g.maxSegs(maxBytes)
	ios := g.maxPlanIOs(maxBytes)
	for i := range e.reqs {
		r := &e.reqs[i]
		r.segs = make([]paritySeg, 0, segs)
		r.ios = make([]MemberIO, 0, ios)
		r.data = make([][]byte, 0, ios)
		r.failed = make([]bool, 0, ios)
		r.done = make([]bool, 0, ios)
		r.times = make([]time.Duration, 0, ios)
		r.hung = make([]bool, 0, ios)
		r.readErr = make([]bool, 0, ios)
		r.avoid = make([]uint64, 0, segs/3+1)
	}
	e.slabs.init(g.maxSlabNeed(maxBytes, false), depth)
	e.slabHead = -1
	e.wsegs = make([]StripeSegment, 0, 2*nd+2)
	e.rsegs = make([]StripeReadSegment, 0, 2*nd+2)
	e.persistGate.init(arr.State().Gen, depth)
	e.parked = make([]uint16, 0, depth)
	e.spare = make([]uint16, 0, depth)
	return e, nil
}

// maxSlabNeed bounds the stripe buffer a request of maxBytes takes
// (slabNeed): its segments' rows add up to at most maxRows, each row
// needing at most a buffer per member and two for the new parity; with
// the write-hole log, an entry per segment (a header, a page of
// alignment, a payload of each parity's rows).
func (g *ParityGeometry) maxSlabNeed(maxBytes int, log bool) int {
	rows := int(g.maxRows(maxBytes))
	need := (g.Members + 2) * rows << 9
	if log {
		need += int(g.maxSegs(maxBytes))*3*ParityLogHeaderSize + g.ParityMembers()*rows<<9
	}
	return need
}

// maxRows bounds the rows of a request of maxBytes's segments added up:
// at most its sectors, and at most a chunk per stripe it touches (whole
// stripes hold nd sectors per row).
func (g *ParityGeometry) maxRows(maxBytes int) uint64 {
	maxSectors := uint64(maxBytes+511) >> 9
	nd := uint64(g.DataMembers())
	return min(maxSectors, (maxSectors+nd-1)/nd+2*g.ChunkSectors)
}

// ParityLogBytesPerRequest bounds the write-hole log space the entries
// of one write of up to maxBytes take: an entry per segment, each a
// header and its payload, in whole pages. A queue's ring must hold at
// least that (a write takes its entries all at once).
func (g *ParityGeometry) ParityLogBytesPerRequest(maxBytes int) int {
	return int(g.maxSegs(maxBytes))*2*ParityLogHeaderSize + g.ParityMembers()*int(g.maxRows(maxBytes))<<9
}

// EnableLog makes the executor write a write-hole log entry for each
// segment of every write (docs/raid56.md, the write hole): after its
// pre-reads, before its data and parity writes, to the log areas of the
// stripe's parity members written (FUA), numbered by clock, in ring (the
// queue's, holding ParityLogBytesPerRequest at least); the data and
// parity writes then go FUA, so that a write's completion makes its
// entries dead. A write that finds the ring full waits (wait is called:
// it must get a checkpoint persisted, SetPersisted, and then wake the
// queue, which calls RetryParked). Call it before the first request.
func (e *ParityExecutor) EnableLog(ring *ParityLogRing, clock *ParityLogClock, uuid [16]byte, wait func(), maxBytes int) {
	g := &e.geo
	segs := int(g.maxSegs(maxBytes))
	for i := range e.reqs {
		r := &e.reqs[i]
		r.logSizes = make([]int, 0, segs)
		r.logOffs = make([]uint64, segs)
	}
	e.slabs.init(g.maxSlabNeed(maxBytes, true), len(e.reqs))
	e.logRing, e.logClock, e.logUUID, e.logWait = ring, clock, uuid, wait
	e.logWaitq = make([]uint16, 0, len(e.reqs))
}

// maxSegs is how many stripe segments a request of maxBytes may plan: a
// range within a stripe is at most 3 runs of rows (a partial first chunk,
// whole rows, a partial last chunk).
func (g *ParityGeometry) maxSegs(maxBytes int) uint64 {
	maxSectors := uint64(maxBytes+511) >> 9
	stripes := maxSectors/(g.ChunkSectors*uint64(g.DataMembers())) + 2
	return 3 * stripes
}

// maxPlanIOs is how many member operations a request of maxBytes may
// plan: each segment reads then writes at most every member once.
func (g *ParityGeometry) maxPlanIOs(maxBytes int) int {
	return max(int(g.maxSegs(maxBytes))*2*g.Members, g.Members)
}

// Start begins request tag. buf holds the data of a write and receives the
// data of a read (len(buf) >= sectors*512).
func (e *ParityExecutor) Start(tag uint16, op ReqOp, sector uint64, sectors uint32, fua bool, buf []byte) {
	r := &e.reqs[tag]
	if r.active {
		panic(fmt.Sprintf("engine: parity request %d started twice", tag))
	}
	r.op, r.sector, r.sectors, r.fua, r.buf = op, sector, sectors, fua, buf
	r.active, r.locked, r.phase = true, false, parityIdle
	r.segs = r.segs[:0] // (none of the last request's counts in Stats)
	r.err, r.needGen, r.lastCopy, r.rebuffer = nil, 0, false, false
	switch op {
	case ReqFlush:
		e.flush(tag)
		return
	case ReqDiscard, ReqWriteZeroes:
		e.finish(tag, ErrParityUnsupported)
		return
	case ReqRead, ReqWrite:
	default:
		e.finish(tag, errUnsupported)
		return
	}
	size := e.geo.ArraySectors()
	if sector >= size || uint64(sectors) > size-sector {
		e.finish(tag, fmt.Errorf("request beyond the end of the array: %w", errBeyondEnd))
		return
	}
	if sectors == 0 {
		e.finish(tag, nil)
		return
	}
	if uint64(len(buf)) < uint64(sectors)<<9 {
		e.finish(tag, fmt.Errorf("request buffer of %d bytes for %d sectors: %w", len(buf), sectors, errUnsupported))
		return
	}
	per := e.geo.ChunkSectors * uint64(e.geo.DataMembers())
	r.first, r.last = sector/per, (sector+uint64(sectors)-1)/per
	r.avoid = r.avoid[:0]
	for range r.last - r.first + 1 {
		r.avoid = append(r.avoid, 0)
	}
	if op == ReqWrite && e.Intent != nil {
		r.rfirst, r.rlast = e.Intent.Regions(sector, uint64(sectors))
		r.started = true
		if !e.Intent.StartWrite(r.rfirst, r.rlast, bitmap.Waiter(uint64(e.Token)<<32|uint64(tag))) {
			r.phase = parityIntent
			return
		}
	}
	if op == ReqRead {
		// Planned without the stripe lock: a read whose chunks are read
		// as they are needs none (md's chunk-aligned reads bypass its
		// stripe cache likewise). It only reads data chunks of members
		// that hold them; a write to the same stripe changes other rows,
		// or these (a read racing a write to its own sectors may see
		// either, as on any block device); a sync job writes parity, or
		// a rebuild's target only below the rows reads may use. A read
		// that has a chunk to reconstruct, from rows a write may be
		// changing, takes the lock (plan).
		e.plan(tag)
		return
	}
	e.lockAndPlan(tag)
}

// lockAndPlan takes the request's stripes and plans it, or parks it
// until the stripe lock wakes the queue.
func (e *ParityExecutor) lockAndPlan(tag uint16) {
	r := &e.reqs[tag]
	if !e.tryLock(tag) {
		e.putSlab(r) // (none held while waiting for the lock)
		r.phase = parityParked
		e.parked = append(e.parked, tag)
		e.Stats.StripeWaits.Add(1)
		return
	}
	e.plan(tag)
}

// Resume continues write tag whose bitmap token was released (its regions
// are durably dirty now): it takes its stripes and is planned.
func (e *ParityExecutor) Resume(tag uint16) {
	r := &e.reqs[tag]
	if !r.active || r.phase != parityIntent {
		panic(fmt.Sprintf("engine: resume of parity request %d that is not waiting for the bitmap", tag))
	}
	r.phase = parityIdle
	e.lockAndPlan(tag)
}

// ResumeFailed finishes write tag, whose bitmap token came back failed
// (its regions could not be made durably dirty), with err: nothing of it
// was issued.
func (e *ParityExecutor) ResumeFailed(tag uint16, err error) {
	r := &e.reqs[tag]
	if !r.active || r.phase != parityIntent {
		panic(fmt.Sprintf("engine: failed resume of parity request %d that is not waiting for the bitmap", tag))
	}
	e.finish(tag, err)
}

// tryLock takes the request's stripes, trying again at once when the
// stripe it failed on was released meanwhile.
func (e *ParityExecutor) tryLock(tag uint16) bool {
	r := &e.reqs[tag]
	for {
		ok, retry := e.lock.TryLock(r.first, r.last, StripeToken(e.queue, tag), e.queue)
		if ok {
			r.locked = true
			return true
		}
		if !retry {
			return false
		}
	}
}

// RetryParked retries the requests parked on the stripe lock: call it on
// the queue's wake-up.
func (e *ParityExecutor) RetryParked() {
	if e.logRing != nil {
		e.retryLogWait()
	}
	if e.retrying {
		e.again = true
		return
	}
	e.retrySlabWait()
	e.retrying = true
	for len(e.parked) > 0 {
		e.again = false
		old := e.parked
		e.parked = e.spare[:0]
		for _, tag := range old {
			if e.tryLock(tag) {
				e.plan(tag)
			} else {
				e.parked = append(e.parked, tag)
			}
		}
		e.spare = old[:0]
		if !e.again {
			break
		}
	}
	e.retrying = false
}

// Parked reports how many requests wait for the stripe lock.
func (e *ParityExecutor) Parked() int { return len(e.parked) }

// reset empties the request's plan for a new one.
func (r *parityReq) reset() {
	r.segs, r.ios, r.data, r.failed, r.done = r.segs[:0], r.ios[:0], r.data[:0], r.failed[:0], r.done[:0]
	r.times, r.hung, r.readErr = r.times[:0], r.hung[:0], r.readErr[:0]
	r.used, r.anyFail, r.pending = 0, false, 0
	r.gaveUp, r.healBuf = false, nil
}

// plan plans the request's stripes from the current state and issues its
// reads.
func (e *ParityExecutor) plan(tag uint16) {
	r := &e.reqs[tag]
	r.reset()
	r.seq = e.nextSeq(tag, r.seq)
	if r.rebuffer {
		// A read given up may still land in the request's pages: nothing
		// more is read into them.
		r.rebuffer = false
		r.buf = e.be.Rebuffer(tag)
	}
	g := &e.geo
	st := e.arr.State()
	r.planSt = st
	per := g.ChunkSectors * uint64(g.DataMembers())
	end := r.sector + uint64(r.sectors)
	write := r.op == ReqWrite
	for s := r.sector; s < end; {
		n := min(end, (s/per+1)*per) - s
		stripe := s / per
		m := g.Stripe(stripe)
		var err error
		if write {
			trusted := e.Untrusted == nil || !e.Untrusted(stripe)
			e.wsegs, err = g.planWrite(st, r.avoid[stripe-r.first], s, uint32(n), trusted, e.wsegs[:0])
			for _, w := range e.wsegs {
				r.segs = append(r.segs, paritySeg{stripe: stripe, m: m, lo: w.Lo, hi: w.Hi, mode: w.Mode,
					want: w.Written, reads: w.Reads, missing: w.Missing, writes: w.Writes})
			}
		} else {
			e.rsegs, err = g.planRead(st, r.avoid[stripe-r.first], s, uint32(n), e.rsegs[:0])
			for _, w := range e.rsegs {
				r.segs = append(r.segs, paritySeg{stripe: stripe, m: m, lo: w.Lo, hi: w.Hi,
					want: w.Wanted, reads: w.Reads, missing: w.Missing})
			}
		}
		if err != nil {
			r.err = err
			e.complete(tag)
			return
		}
		s += n
	}
	if write {
		if st.DropGen > e.persisted {
			// Planned around a failure that may not be durable: the
			// parity written stands for a member a crash could bring
			// back as in sync, with its old data (see Executor.plan).
			r.needGen = max(r.needGen, st.DropGen)
		}
		if r.needGen > e.persisted {
			r.phase = parityHeld
			e.holding = append(e.holding, tag)
			e.be.Persist(st)
			return
		}
	}
	if !write && !r.locked {
		for i := range r.segs {
			if r.segs[i].missing != 0 {
				// A chunk to reconstruct (a member lost, or one whose
				// read failed: avoid): under the lock. Nothing of this
				// plan was issued.
				r.reset()
				e.lockAndPlan(tag)
				return
			}
		}
	}
	if !e.takeSlab(tag) {
		return // (nothing of this plan was issued)
	}
	for i := range r.segs {
		e.prepare(r, &r.segs[i])
	}
	r.phase = parityReading
	e.submit(tag, 0)
}

// prepare gives segment s its buffers and appends its reads.
func (e *ParityExecutor) prepare(r *parityReq, s *paritySeg) {
	n := int(s.hi-s.lo) << 9
	members := uint64(1)<<uint(e.geo.Members) - 1
	if r.op == ReqRead {
		data := members &^ (1<<uint(s.m.P) | qbit(s.m.Q))
		for mm := s.reads; mm != 0; mm &= mm - 1 {
			mem := bits.TrailingZeros64(mm)
			if s.missing == 0 || s.want&(1<<uint(mem)) != 0 {
				s.chunk[mem] = e.reqData(r, s, mem)
			} else {
				s.chunk[mem] = r.alloc(n)
			}
			e.addIO(r, s, mem, IORead, s.chunk[mem])
		}
		if s.missing != 0 {
			// Every data chunk not read is rebuilt (the wanted ones and
			// any other lost one: the decoder fills them all).
			for mm := data &^ s.reads; mm != 0; mm &= mm - 1 {
				s.chunk[bits.TrailingZeros64(mm)] = r.alloc(n)
			}
		}
		return
	}
	for mm := s.reads; mm != 0; mm &= mm - 1 {
		mem := bits.TrailingZeros64(mm)
		s.chunk[mem] = r.alloc(n)
		e.addIO(r, s, mem, IORead, s.chunk[mem])
	}
	for mm := s.missing; mm != 0; mm &= mm - 1 {
		s.chunk[bits.TrailingZeros64(mm)] = r.alloc(n)
	}
	if s.mode == ParityDataOnly {
		return
	}
	pms := [2]int{s.m.P, s.m.Q}
	for k, pm := range pms[:e.par.Count()] {
		if s.mode == ParityRMW && s.reads&(1<<uint(pm)) != 0 {
			s.par[k] = s.chunk[pm] // updated in place
		} else {
			// RMW with this parity member lost: a scratch the update
			// goes to, never written.
			s.par[k] = r.alloc(n)
		}
	}
}

func qbit(q int) uint64 {
	if q < 0 {
		return 0
	}
	return 1 << uint(q)
}

// reqData is the part of the request's buffer holding data member mem's
// rows of segment s.
func (e *ParityExecutor) reqData(r *parityReq, s *paritySeg, mem int) []byte {
	off := e.reqOff(r, s, mem)
	return r.buf[off<<9 : (off+s.hi-s.lo)<<9]
}

// reqOff is the sector of the request where data member mem's rows of
// segment s start.
func (e *ParityExecutor) reqOff(r *parityReq, s *paritySeg, mem int) uint64 {
	nd := uint64(e.geo.DataMembers())
	d := uint64(0)
	for int(s.m.Data[d]) != mem {
		d++
	}
	return (s.stripe*nd+d)*e.geo.ChunkSectors + s.lo - r.sector
}

func (e *ParityExecutor) addIO(r *parityReq, s *paritySeg, mem int, kind IOKind, data []byte) {
	// (With the write-hole log, every data and parity write is FUA: its
	// completion makes its entries dead.)
	r.ios = append(r.ios, MemberIO{Member: int32(mem), Kind: kind, FUA: (r.fua || e.logRing != nil) && kind == IOWrite,
		Sector: s.stripe*e.geo.ChunkSectors + s.lo, Sectors: uint32(s.hi - s.lo)})
	r.data = append(r.data, data)
}

// submit issues the request's operations from first on; with none, the
// phase ends at once.
func (e *ParityExecutor) submit(tag uint16, first int) {
	r := &e.reqs[tag]
	for len(r.failed) < len(r.ios) {
		r.failed = append(r.failed, false)
		r.done = append(r.done, false)
		r.hung = append(r.hung, false)
		r.readErr = append(r.readErr, false)
	}
	if e.Now != nil {
		now := e.Now()
		for len(r.times) < len(r.ios) {
			r.times = append(r.times, now)
		}
	}
	end := len(r.ios)
	if first == end {
		e.phaseDone(tag)
		return
	}
	// Counted before any is submitted: a backend may complete one from
	// within Submit.
	r.pending += end - first
	seq := r.seq
	for i := first; i < end; i++ {
		e.be.Submit(tag, opID(seq, i), r.ios[i], r.data[i])
	}
}

// Done reports the result of member operation id of request tag.
func (e *ParityExecutor) Done(tag uint16, id OpID, res int32) {
	r := &e.reqs[tag]
	i := id.Index()
	if !r.active || id.seq() != r.seq || i >= len(r.ios) || r.done[i] {
		e.returned(tag, id)
		e.slabReturned(tag, id)
		e.be.Stale(tag, id)
		return
	}
	r.done[i] = true
	io := r.ios[i]
	if e.OpDone != nil && i < len(r.times) {
		e.OpDone(tag, id, io.Member, io.Kind, io.Sectors, res, e.Now()-r.times[i])
	}
	want := int32(0)
	if io.Kind == IORead || io.Kind == IOWrite {
		want = int32(io.Sectors) << 9
	}
	departed := e.be.Departed(tag, id, io)
	if res != want || (departed && io.Kind != IORead) {
		// (A write to a device that left its role counts for nothing,
		// whatever its result: Backend.Departed.)
		r.failed[i], r.anyFail = true, true
		r.readErr[i] = io.Kind == IORead && !departed
		if e.MemberError != nil && !departed {
			e.MemberError(int(io.Member), io.Kind, res)
		}
	} else if io.Kind == IORead && e.MemberReadOK != nil && !departed {
		e.MemberReadOK(int(io.Member))
	}
	r.pending--
	if r.pending == 0 {
		e.phaseDone(tag)
	}
}

// Tick gives up member operations older than MemberTimeout (queue thread,
// every second or so), as Executor's: the member is failed (not the last
// copy: the request then fails) and the request goes on as after an I/O
// error (a read or pre-read is planned again around it, reconstructing
// its chunk from the others). What it may still use is kept from reuse
// until it comes back: its stripe buffer (the request takes another), the
// request's pages (the backend's, see Backend.Abandon; a read given up
// there makes the next plan take another buffer, Rebuffer).
func (e *ParityExecutor) Tick() {
	if e.MemberTimeout <= 0 || e.Now == nil {
		return
	}
	now := e.Now()
	for t := range e.reqs {
		tag := uint16(t)
		r := &e.reqs[t]
		if !r.active || r.pending == 0 {
			continue
		}
		for i := 0; i < len(r.ios) && i < len(r.times); i++ {
			if r.done[i] || now-r.times[i] < e.MemberTimeout {
				continue
			}
			io, id := r.ios[i], opID(r.seq, i)
			departed := e.be.Departed(tag, id, io)
			if !e.be.Abandon(tag, id, io) {
				if io.Kind == IORead && !r.hung[i] && !departed {
					// Waited for, but its member is failed now, so that
					// later requests leave it alone.
					r.hung[i] = true
					if e.MemberError != nil {
						e.MemberError(int(io.Member), io.Kind, -int32(errnoTimedOut))
					}
					failBlamed(e.arr, e.be, tag, id, io)
				}
				continue
			}
			r.done[i], r.failed[i], r.anyFail, r.gaveUp = true, true, true, true
			e.given = append(e.given, givenUp{tag: tag, id: id})
			if e.OpDone != nil {
				// Its result is told now (its late one is dropped).
				e.OpDone(tag, id, io.Member, io.Kind, io.Sectors, -int32(errnoTimedOut), now-r.times[i])
			}
			if e.MemberError != nil && !departed {
				e.MemberError(int(io.Member), io.Kind, -int32(errnoTimedOut))
			}
			if d := r.data[i]; len(d) > 0 {
				if e.healGiveUp(tag, id, d) {
					// (a heal's read back)
				} else if e.lend(tag, id, r, d) {
					// (in a stripe buffer)
				} else if io.Kind == IORead {
					r.rebuffer = true
				}
			}
			r.pending--
			if r.pending == 0 {
				e.phaseDone(tag)
				break
			}
		}
	}
}

// lend keeps the stripe buffer d lies in from reuse until operation id of
// tag comes back (returned); the request takes another if d lies in its
// own. It reports false when d is not in a stripe buffer (the request's
// pages).
func (e *ParityExecutor) lend(tag uint16, id OpID, r *parityReq, d []byte) bool {
	if within(d, r.slab) {
		// (Its next plan takes another: nothing of this one allocates
		// after an operation is given up, its phase ends failed.)
		e.lent = append(e.lent, lentSlab{tag: tag, op: id, buf: r.slab})
		e.slabs.lend(r.slab)
		r.slab = nil
		e.slabFreed() // (room made for a request that waits)
		return true
	}
	for _, l := range e.lent {
		if l.tag == tag && within(d, l.buf) {
			// A buffer the request left already (another operation of
			// the same plan given up).
			e.lent = append(e.lent, lentSlab{tag: tag, op: id, buf: l.buf})
			return true
		}
	}
	return false
}

// nextSeq is the OpID sequence of tag's next plan: the one after seq,
// but none an operation of tag given up and still out carries (see
// Executor.nextSeq).
func (e *ParityExecutor) nextSeq(tag uint16, seq uint16) uint16 { return e.given.nextSeq(tag, seq) }

// returned forgets operation id of tag, given up, now that it came back.
func (e *ParityExecutor) returned(tag uint16, id OpID) { e.given.returned(tag, id) }

// slabReturned takes note that operation id of tag, given up, came back: a
// stripe buffer no other such operation uses is free again.
func (e *ParityExecutor) slabReturned(tag uint16, id OpID) {
	for i, l := range e.lent {
		if l.tag != tag || l.op != id {
			continue
		}
		e.lent = append(e.lent[:i], e.lent[i+1:]...)
		for _, o := range e.lent {
			if unsafe.SliceData(o.buf) == unsafe.SliceData(l.buf) {
				return
			}
		}
		if !l.heal {
			e.slabs.returned(l.buf)
			e.slabFreed()
		}
		return
	}
}

// within reports whether d lies in buf.
func within(d, buf []byte) bool {
	if len(d) == 0 || len(buf) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
	b := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return p >= b && p < b+uintptr(len(buf))
}

// phaseDone moves a request on once its operations have all finished.
func (e *ParityExecutor) phaseDone(tag uint16) {
	r := &e.reqs[tag]
	if r.anyFail {
		e.failMembers(tag, r)
	}
	switch r.phase {
	case parityReading:
		if r.anyFail {
			if r.err != nil || r.lastCopy {
				e.complete(tag)
				return
			}
			// Planned again without the failed members: their chunks
			// are reconstructed from the others.
			e.plan(tag)
			return
		}
		if r.op == ReqRead {
			for i := range r.segs {
				s := &r.segs[i]
				if s.missing == 0 {
					continue
				}
				if r.err = e.rebuild(s); r.err != nil {
					break
				}
				for mm := s.missing; mm != 0; mm &= mm - 1 {
					mem := bits.TrailingZeros64(mm)
					copy(e.reqData(r, s, mem), s.chunk[mem])
				}
			}
			e.complete(tag)
			return
		}
		if e.logRing != nil && e.readabilityMoved(r) {
			// The entries are decided from the plan's view; planned
			// again (held until a failure since is durable).
			e.plan(tag)
			return
		}
		for i := range r.segs {
			s := &r.segs[i]
			if e.logRing != nil {
				e.logPrepare(r, s)
				if s.mode == ParityRMW {
					// From the old parity and data, before the update
					// overwrites them.
					r.err = e.logRMW(r, s)
				}
			}
			if r.err == nil {
				r.err = e.compute(r, s)
			}
			if r.err == nil && e.logRing != nil && s.mode != ParityRMW {
				r.err = e.logFromData(r, s)
			}
			if r.err != nil {
				e.complete(tag)
				return
			}
		}
		if e.logRing != nil {
			e.logIssue(tag)
			return
		}
		e.writeData(tag)
	case parityLogging:
		if r.anyFail {
			// An entry did not reach a parity member (failed now): its
			// data and parity writes were not issued, so its entries
			// are harmless and it holds them no more; planned again.
			e.logRelease(r)
			if r.err != nil || r.lastCopy {
				e.complete(tag)
				return
			}
			e.plan(tag)
			return
		}
		e.writeData(tag)
	case parityFlushing:
		ok := false
		for i := range r.ios {
			ok = ok || !r.failed[i]
		}
		if !ok && r.err == nil {
			r.err = ErrNoCopy
		}
		e.complete(tag)
	case parityHealReading:
		e.healWrite(tag)
	case parityHealWriting:
		e.healDone(tag)
	default: // parityWriting
		if r.lastCopy && e.healStart(tag) {
			return
		}
		e.complete(tag)
	}
}

// writeData issues a write's data and parity writes (computed).
func (e *ParityExecutor) writeData(tag uint16) {
	r := &e.reqs[tag]
	first := len(r.ios)
	{
		for i := range r.segs {
			s := &r.segs[i]
			for mm := s.writes; mm != 0; mm &= mm - 1 {
				mem := bits.TrailingZeros64(mm)
				var b []byte
				switch mem {
				case s.m.P:
					b = s.par[0]
				case s.m.Q:
					b = s.par[1]
				default:
					if s.want&(1<<uint(mem)) == 0 {
						// A rebuilding member's chunk, rebuilt
						// (ParityReconstruct).
						b = s.chunk[mem]
					} else {
						b = e.reqData(r, s, mem)
					}
				}
				e.addIO(r, s, mem, IOWrite, b)
			}
		}
	}
	r.phase = parityWriting
	e.submit(tag, first)
}

// failMembers fails the members of the request's failed operations (not
// the last copy: see the contract), but for operations whose device has
// left the role since (Backend.Departed): they blame nobody.
func (e *ParityExecutor) failMembers(tag uint16, r *parityReq) {
	from := 0
	switch r.phase {
	case parityHealReading: // (the write phase's were seen after it)
		from = r.healFrom
	case parityHealWriting:
		from = r.healWritesFrom
	}
	for i, io := range r.ios {
		if i < from || !r.failed[i] {
			continue
		}
		if e.be.Departed(tag, opID(r.seq, i), io) {
			// Acknowledged only once the role's drop is durable, as for
			// a blamed failure (see Executor.Done).
			r.needGen = max(r.needGen, e.arr.State().DropGen)
			continue
		}
		if r.readErr[i] && e.ReadRepair != nil && !e.untrustedAround(r, io) {
			// A bad sector, not a dead member (md's read error path):
			// the request reads around it (the next plan reconstructs
			// the chunk), and the rows are rewritten from the others.
			r.avoid[io.Sector/e.geo.ChunkSectors-r.first] |= 1 << uint(io.Member)
			e.ReadRepair(int(io.Member), io.Sector, io.Sectors)
			continue
		}
		st, out, departed := failBlamed(e.arr, e.be, tag, opID(r.seq, i), io)
		if departed {
			// It left the role since the look above (a replace
			// meanwhile): as there.
			r.needGen = max(r.needGen, st.DropGen)
			continue
		}
		if !out {
			r.lastCopy = true
			continue
		}
		r.needGen = max(r.needGen, st.Gen)
	}
}

// untrustedAround reports whether write r's failed pre-read io is of a
// data chunk the write does not write, in a stripe whose parity is
// untrusted (Untrusted): reading around it is then not safe, and its
// member fails instead (failBlamed, as without ReadRepair). The next plan
// would rebuild the chunk from that parity, which is garbage there (a
// region never written, or not resynced), so the rebuilt rows are not
// what the member holds, and the new parity would be computed over
// them: with the member kept, the stripe's data and parity disagree
// once the write releases the stripe, until read repair rewrites the
// rows, later and outside the stripe lock, or never (a crash first). A
// rebuild, or a degraded read, of a chunk the write wrote would take it
// from that mismatch meanwhile: the acknowledged write lost. (Over
// trusted parity the rebuilt rows are the member's, so the stripe
// agrees; a written chunk's member, or a parity member, read around is
// written over the rows anyway.)
func (e *ParityExecutor) untrustedAround(r *parityReq, io MemberIO) bool {
	if r.op != ReqWrite || e.Untrusted == nil || io.Kind != IORead {
		return false
	}
	cs := e.geo.ChunkSectors
	stripe, row := io.Sector/cs, io.Sector%cs
	for k := range r.segs {
		s := &r.segs[k]
		if s.stripe != stripe || row < s.lo || row >= s.hi {
			continue
		}
		if s.m.Slot[io.Member] < 0 || s.want&(1<<uint(io.Member)) != 0 {
			return false
		}
		return e.Untrusted(stripe)
	}
	return false
}

// compute makes the parity segment s of a write writes.
func (e *ParityExecutor) compute(r *parityReq, s *paritySeg) error {
	pc := e.par.Count()
	switch s.mode {
	case ParityDataOnly:
		return nil
	case ParityRMW:
		for mm := s.want; mm != 0; mm &= mm - 1 {
			mem := bits.TrailingZeros64(mm)
			delta := s.chunk[mem]
			subtle.XORBytes(delta, delta, e.reqData(r, s, mem))
			if err := e.par.Update(delta, int(s.m.Slot[mem]), s.par[:pc]); err != nil {
				return err
			}
		}
		return nil
	case ParityReconstruct:
		if err := e.rebuild(s); err != nil {
			return err
		}
	}
	nd := e.geo.DataMembers()
	shards := e.shards[:nd]
	for d := range nd {
		mem := int(s.m.Data[d])
		b := s.chunk[mem]
		if s.want&(1<<uint(mem)) != 0 {
			b = e.reqData(r, s, mem)
		}
		shards[s.m.Slot[mem]] = b
	}
	return e.par.Compute(shards, s.par[:pc])
}

// rebuild fills the chunks of the data members segment s did not read
// from those it read (data, P, Q).
func (e *ParityExecutor) rebuild(s *paritySeg) error {
	nd := e.geo.DataMembers()
	shards := e.shards[:nd+e.par.Count()]
	lost, lostMem := 0, -1
	for d := range nd {
		mem := int(s.m.Data[d])
		if s.reads&(1<<uint(mem)) != 0 {
			shards[s.m.Slot[mem]] = s.chunk[mem]
		} else {
			shards[s.m.Slot[mem]] = s.chunk[mem][:0]
			lost, lostMem = lost+1, mem
		}
	}
	shards[nd] = nil
	if s.reads&(1<<uint(s.m.P)) != 0 {
		shards[nd] = s.chunk[s.m.P]
	}
	if s.m.Q >= 0 {
		shards[nd+1] = nil
		if s.reads&(1<<uint(s.m.Q)) != 0 {
			shards[nd+1] = s.chunk[s.m.Q]
		}
	}
	if lost == 0 {
		return nil
	}
	if lost == 1 && shards[nd] != nil {
		// The common case, without the decoder: D = P ^ the other data.
		b := s.chunk[lostMem]
		copy(b, shards[nd])
		for sl := range nd {
			if len(shards[sl]) != 0 {
				subtle.XORBytes(b, b, shards[sl])
			}
		}
		return nil
	}
	if err := e.par.ReconstructData(shards); err != nil {
		return fmt.Errorf("stripe %d: rebuilding lost chunks: %w", s.stripe, err)
	}
	for d := range nd {
		mem := int(s.m.Data[d])
		s.chunk[mem] = shards[s.m.Slot[mem]]
	}
	return nil
}

// flush sends a FLUSH to every writable member.
func (e *ParityExecutor) flush(tag uint16) {
	r := &e.reqs[tag]
	r.reset()
	r.seq = e.nextSeq(tag, r.seq)
	st := e.arr.State()
	var err error
	r.ios, err = e.arr.PlanFlush(st, r.ios)
	if err != nil {
		e.finish(tag, err)
		return
	}
	for range r.ios {
		r.data = append(r.data, nil)
	}
	if st.DropGen > e.persisted {
		// What it makes durable skipped a member not yet recorded as
		// failed (see Executor.plan).
		r.needGen = max(r.needGen, st.DropGen)
	}
	r.phase = parityFlushing
	e.submit(tag, 0)
}

// complete finishes a request once the failures it saw are durable.
func (e *ParityExecutor) complete(tag uint16) {
	r := &e.reqs[tag]
	if r.err == nil && r.lastCopy {
		r.err = ErrLastCopy
	}
	if r.needGen > e.persisted {
		r.phase = parityWaiting
		e.waiting = append(e.waiting, tag)
		e.be.Persist(e.arr.State())
		return
	}
	e.finish(tag, r.err)
}

func (e *ParityExecutor) finish(tag uint16, err error) {
	r := &e.reqs[tag]
	r.active, r.phase = false, parityIdle
	if err == nil {
		e.Stats.count(r)
	}
	e.logRelease(r)
	e.putSlab(r)
	if r.locked {
		r.locked = false
		e.lock.Unlock(r.first, r.last, StripeToken(e.queue, tag))
	}
	if r.started {
		r.started = false
		e.Intent.EndWrite(r.rfirst, r.rlast)
	}
	e.be.Complete(tag, err)
}

// Persisted tells the executor that state generation gen is durable:
// requests that waited for it complete, writes held for it are issued.
func (e *ParityExecutor) Persisted(gen uint64) { e.persistedTo(gen, e) }

func (e *ParityExecutor) gateReq(tag uint16) (uint64, error) {
	r := &e.reqs[tag]
	return r.needGen, r.err
}

// replan plans held write tag again (nothing of its old plan was issued).
func (e *ParityExecutor) replan(tag uint16) { e.plan(tag) }

// PersistFailed finishes every request waiting for a persist, and every
// write held unissued, with err.
func (e *ParityExecutor) PersistFailed(err error) { e.failAll(e, err) }
