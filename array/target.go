package array

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Params derives the ublk device parameters from the array: the array's
// size; logical/physical block = the largest of the members'; io_min =
// chunk and io_opt = one full data stripe when that is a power of two
// (raid0/raid10), chunk_sectors for raid0/raid10; VOLATILE_CACHE|FUA
// always, as md: a member put in later (replace, a spare, re-add) may
// have a write-back cache, and parameters are fixed while the device
// lives, so FLUSH must reach the array whatever today's members are (it
// reaches every member as fdatasync, which costs nothing on one without a
// cache); DISCARD and WRITE_ZEROES when every member and spare can do
// them. A later member that cannot answers EOPNOTSUPP, which fails no
// member: a discard is advisory and completes, a write-zeroes fails with
// EOPNOTSUPP and the kernel writes zeroes instead.
func (a *Array) Params() ublk.Params {
	if a.Engine.Parity != nil {
		return a.parityParams()
	}
	g := a.Engine.Geo
	var p ublk.Params
	p.Types = ublk.ParamTypeBasic | ublk.ParamTypeDiscard
	b := &p.Basic
	lbs, pbs, discard, zeroes := 512, 512, true, true
	a.mu.Lock()
	ms := append([]*Member(nil), a.Members...)
	for _, sp := range a.spares {
		ms = append(ms, sp.m)
	}
	a.mu.Unlock()
	for _, m := range ms {
		if m == nil {
			continue
		}
		lbs, pbs = max(lbs, m.LogicalBlock), max(pbs, m.PhysicalBlock)
		discard = discard && m.Discard
		zeroes = zeroes && m.WriteZeroes
	}
	b.LogicalBSShift, b.PhysicalBSShift = log2(uint64(lbs)), log2(uint64(pbs))
	b.IOMinShift = b.PhysicalBSShift
	if g.Level != engine.Level1 {
		chunk := g.ChunkSectors << 9
		b.IOMinShift = log2(max(chunk, uint64(pbs)))
		b.ChunkSectors = uint32(g.ChunkSectors)
		if w := g.DataStripeSectors() << 9; w&(w-1) == 0 && w >= chunk {
			b.IOOptShift = log2(w)
		}
	}
	b.DevSectors = g.ArraySectors()
	p.AlignDMA(lbs)
	b.Attrs |= ublk.AttrVolatileCache | ublk.AttrFUA
	d := &p.Discard
	d.DiscardGranularity = uint32(max(pbs, 4096))
	// 1 GiB, or less with small chunks: the request's plan, one member
	// operation per chunk piece and copy, must stay within what the
	// executor tells apart (the kernel does not split a discard at the
	// chunk size).
	most := uint32(min(1<<21, g.MaxPlanSectors()))
	if zeroes {
		d.MaxWriteZeroesSectors = most
	}
	if discard {
		d.MaxDiscardSectors = most
		d.MaxDiscardSegments = 1
	}
	return p
}

// log2 of a power of two.
func log2(n uint64) uint8 { return uint8(bits.Len64(n) - 1) }

// Files implements ublk.Target: member r is fixed file FirstTargetFile+r;
// a missing member's slot is empty (-1).
func (a *Array) Files() []int {
	fds := make([]int, len(a.Members))
	for r, m := range a.Members {
		fds[r] = -1
		if m != nil {
			fds[r] = m.Fd()
		}
	}
	return fds
}

// ZeroCopy implements ublk.ZeroCopyTarget: every member read and write
// of a request moves its data by SubmitMember, which on a zero-copy queue
// uses the request's own pages; read repair and resync use buffers of
// their own.
//
// Not for raid5/6: their executor reads a write's data in user space
// (RMW) and moves pre-reads and parity through buffers of its own.
func (a *Array) ZeroCopy() bool { return a.Engine.Parity == nil }

// NewQueue implements ublk.Target.
func (a *Array) NewQueue(q *ublk.Queue) (ublk.QueueHandler, error) {
	if a.Engine.Parity != nil && a.logBytes > 0 {
		if _, _, err := a.parityLogRing(q.ID(), q.MaxIOBytes()); err != nil {
			return nil, err
		}
	}
	return a.newQueue(ublkRing{q}), nil
}

// ring is what a queue handler does with its ublk queue: *ublk.Queue's
// methods, and member operations as SQEs on its ring (ublkRing). The model
// test runs the handlers on rings of its own over in-memory members.
type ring interface {
	ID() int
	Depth() int
	MaxIOBytes() int
	// Now is the queue loop's clock (read once per turn of the loop).
	Now() time.Time
	Wake()
	// SetTargetFile puts fd (-1: none) in member slot i of the ring's
	// fixed-file table.
	SetTargetFile(i, fd int) error
	Complete(tag uint16, err error)
	// Fail ends the queue on a failure of its own (ublk.Queue.Fail).
	Fail(err error)
	// ZeroCopy: each request's data is its own pages, which only member
	// I/O reaches (ublk.Queue.ZeroCopy); the kernel completes a request
	// only once every member operation on its pages has returned.
	ZeroCopy() bool
	ReserveBuffer() (int, bool)
	SwapBuffer(tag uint16, spare, n int) int
	// Buffer is tag's buffer now (after SwapBuffer, the spare).
	Buffer(tag uint16) []byte
	ReleaseBuffer(b int)
	// SubmitMember queues member operation io of request tag on m, at
	// byte off of the device with data as its buffer; its completion comes
	// back to OnCompletion with userData. fixed says m is in the ring's
	// fixed-file slot for io.Member.
	SubmitMember(userData uint64, tag uint16, m *Member, fixed bool, io engine.MemberIO, off uint64, data []byte) error
}

// ublkRing is a ring over a ublk queue: member I/O as io_uring SQEs.
type ublkRing struct{ *ublk.Queue }

// SubmitMember implements ring: one SQE.
func (q ublkRing) SubmitMember(userData uint64, tag uint16, m *Member, fixed bool, io engine.MemberIO, off uint64, data []byte) error {
	s, err := q.SQE(userData)
	if err != nil {
		return err
	}
	file := int32(ublk.FirstTargetFile) + io.Member
	ud := s.UserData
	switch io.Kind {
	case engine.IORead, engine.IOWrite:
		if q.ZeroCopy() {
			kind := ublk.OpReadFixed
			if io.Kind == engine.IOWrite {
				kind = ublk.OpWriteFixed
			}
			ublk.PrepRWSlot(s, kind, file, tag, q.BufOffset(tag, data), uint32(len(data)), off, ud)
			if io.FUA {
				s.OpFlags = ublk.RWFDsync
			}
			break
		}
		kind := ublk.OpRead
		// The tag's registered buffer holds the request's data; a parity
		// array's pre-reads and parity are in buffers of its own.
		fixedBuf := q.TagFixed(tag) && q.InTagBuf(tag, data)
		switch {
		case io.Kind == engine.IOWrite && fixedBuf:
			kind = ublk.OpWriteFixed
		case io.Kind == engine.IOWrite:
			kind = ublk.OpWrite
		case fixedBuf:
			kind = ublk.OpReadFixed
		}
		ublk.PrepRW(s, kind, file, data, off, ud)
		if io.FUA {
			s.OpFlags = ublk.RWFDsync
		}
	case engine.IOFlush:
		ublk.PrepFsync(s, file, ublk.FsyncDatasync, ud)
	case engine.IODiscard:
		if m.BlockDevice {
			ublk.PrepBlockDiscard(s, file, off, uint64(io.Sectors)<<9, ud)
		} else {
			ublk.PrepFallocate(s, file, ublk.FallocPunchHole|ublk.FallocKeepSize, off, uint64(io.Sectors)<<9, ud)
		}
	case engine.IOWriteZeroes:
		mode := uint32(ublk.FallocZeroRange)
		if !m.BlockDevice {
			mode |= ublk.FallocKeepSize
		}
		ublk.PrepFallocate(s, file, mode, off, uint64(io.Sectors)<<9, ud)
	}
	if !fixed {
		// The fixed-file table could not take it: use its descriptor.
		s.Flags &^= ublk.SQEFixedFile
		s.Fd = int32(m.Fd())
	}
	return nil
}

// newQueue makes the handler of queue q.
func (a *Array) newQueue(q ring) *queue {
	h := &queue{q: q, a: a, fixed: make([]*Member, len(a.Members)), shard: q.ID() % outShards}
	for r := range a.Members {
		// Files() registered some member; one swapped in or out since
		// (a spare activated during assembly, say) would make a guess
		// wrong, so every slot is set again before its first use.
		h.fixed[r] = unsynced
	}
	if a.Bitmap != nil {
		h.inbox = make([]uint16, 0, q.Depth())
		h.work = make([]uint16, 0, q.Depth())
	}
	h.stats.ops = make([]atomic.Pointer[memberCounters], len(a.Members))
	if a.Engine.Parity != nil {
		h.exec = a.newParityRunner(h, q)
	} else {
		h.exec = a.newExecutor(h, q)
	}
	h.spare = make([]int, q.Depth())
	for i := range h.spare {
		h.spare[i] = -1
	}
	h.bytes = make([]int, q.Depth())
	h.open = make([]bool, q.Depth())
	h.sent = make([][]*roleDevice, q.Depth())
	n := 4*a.Engine.MaxPlanIOs(q.MaxIOBytes()) + 4*engine.MaxCopies // as the executor's
	for i := range h.sent {
		h.sent[i] = make([]*roleDevice, 0, n)
	}
	a.qmu.Lock()
	if a.queues == nil {
		a.queues = map[int]*queue{}
	}
	a.queues[q.ID()] = h
	a.qmu.Unlock()
	return h
}

// newExecutor is the raid0/1/10 executor of queue handler h on ring q.
func (a *Array) newExecutor(h *queue, q ring) *engine.Executor {
	e := engine.NewExecutor(a.Engine, h, q.Depth(), q.MaxIOBytes())
	start := time.Now()
	// The clock times bitmap waits, member reads (read balancing) and
	// member timeouts. It is the queue loop's clock, read once per turn:
	// a clock read per member operation cost 5% of the queue thread at 4k
	// QD32 under TCG.
	e.Now = func() time.Duration { return q.Now().Sub(start) }
	e.Balance().WriteMostly = a.WriteMostly
	if bm := a.Bitmap; bm != nil {
		e.Intent = bm
		e.Token = uint32(q.ID())
		e.Waited = a.bitmapWait.Observe
	}
	if a.barrier != nil {
		e.Barrier = a.barrier
	}
	if a.sync != nil && a.Bitmap == nil {
		e.ResyncFrom = &a.sync.from
	}
	if a.repairs != nil {
		e.ReadRepair = a.requestRepairFrom
		e.MemberError = a.countReadErr
	}
	if a.sync != nil {
		e.Unsynced = a.markUnsynced
	}
	e.OpDone = h.opDone
	e.MemberTimeout = a.MemberTimeout
	return e
}

// requestRunner is what a queue asks of its request executor:
// *engine.Executor (raid0/1/10) or the raid5/6 one (parityRunner).
type requestRunner interface {
	Start(tag uint16, op engine.ReqOp, sector uint64, sectors uint32, fua bool, buf []byte)
	Done(tag uint16, id engine.OpID, res int32)
	Resume(tag uint16)
	ResumeFailed(tag uint16, err error)
	RetryParked()
	Tick()
	Persisted(gen uint64)
	PersistFailed(err error)
}

// unsynced marks a fixed-file slot whose content the queue has not set.
var unsynced = new(Member)

// queue runs one ublk queue's requests through an engine.Executor, with
// member I/O on the queue's ring. It is the executor's Backend.
type queue struct {
	q     ring
	a     *Array
	exec  requestRunner
	fixed []*Member // per role: the member in the ring's fixed-file table
	shard int       // this queue's counter in Member.out
	// filesSeen is the array's filesEpoch the queue's fixed-file table
	// matched at its last syncFiles; closed is set when the queue stops.
	filesSeen atomic.Uint64
	closed    atomic.Bool
	// ringFailed is set (queue thread) when the ring refused a member
	// operation and the queue was failed: see OnTick.
	ringFailed bool
	requests   atomic.Uint64 // requests handled (the syncer's busy detector)
	inflight   atomic.Int64  // requests being served (metrics)
	// bitmapWrites counts write-type requests that went through the
	// bitmap (metrics).
	bitmapWrites atomic.Uint64
	stats        queueStats
	// Member timeouts: the spare buffer reserved for each tag whose
	// request gave up a read or write (-1: none), the request sizes, the
	// operations given up whose results have not come back, and the
	// buffers requests left behind (Rebuffer, Complete) for them.
	spare      []int
	bytes      []int
	quarantine []quarantined
	held       []heldBuf
	// Per tag: open: its request left buffers in held.
	open []bool
	// sent[tag][i]: the role device operation i of tag's request was
	// submitted to (Departed, Abandon: the role may have another device
	// since, or the same one re-added).
	sent [][]*roleDevice

	// Bitmap tokens released by the flusher: inbox is filled under mu by
	// the flusher, swapped with work by the queue thread on wake-up.
	mu          sync.Mutex
	inbox, work []uint16
	// failedIn/failedWork: tokens of writes whose bitmap batch failed
	// (Bitmap.Failed), likewise.
	failedIn, failedWork []uint16
}

// post queues a released write (failed: one whose bitmap batch failed)
// for the queue thread; it reports whether the queue needs a wake-up (its
// inboxes were empty). Flusher goroutine.
func (h *queue) post(tag uint16, failed bool) bool {
	h.mu.Lock()
	first := len(h.inbox) == 0 && len(h.failedIn) == 0
	if failed {
		h.failedIn = append(h.failedIn, tag)
	} else {
		h.inbox = append(h.inbox, tag)
	}
	h.mu.Unlock()
	return first
}

// OnWake implements ublk.Waker: resume the writes whose bitmap regions
// are durable now (fail those whose bitmap batch failed), and retry those
// a sync barrier turned away.
func (h *queue) OnWake() {
	h.mu.Lock()
	h.inbox, h.work = h.work[:0], h.inbox
	h.failedIn, h.failedWork = h.failedWork[:0], h.failedIn
	h.mu.Unlock()
	for _, tag := range h.failedWork {
		h.exec.ResumeFailed(tag, errBitmapWrite)
	}
	for _, tag := range h.work {
		h.exec.Resume(tag)
	}
	h.exec.RetryParked()
	h.syncFiles()
}

// syncFiles brings the ring's fixed-file table up to the members the
// array publishes (a member replaced, removed or re-added) and records the
// epoch it matched, for swapFile. Queue thread.
func (h *queue) syncFiles() {
	epoch := h.a.filesEpoch.Load()
	for r := range h.fixed {
		h.syncFile(r)
	}
	h.filesSeen.Store(epoch)
}

// syncFile puts role's published member into the ring's fixed-file slot
// if it is not there; on failure the slot keeps its old file and Submit
// uses the member's descriptor directly.
func (h *queue) syncFile(role int) {
	m := h.a.currentMember(role)
	if m == h.fixed[role] {
		return
	}
	fd := -1
	if m != nil {
		fd = m.Fd()
	}
	if err := h.q.SetTargetFile(role, fd); err == nil {
		h.fixed[role] = m
	}
}

func (h *queue) Handle(req *ublk.Request) {
	h.requests.Store(h.requests.Load() + 1) // one writer: no atomic add needed
	h.inflight.Store(h.inflight.Load() + 1)
	if h.a.Bitmap != nil && (req.Op == ublk.IOOpWrite || req.Op == ublk.IOOpDiscard || req.Op == ublk.IOOpWriteZeroes) {
		h.bitmapWrites.Store(h.bitmapWrites.Load() + 1)
	}
	var op engine.ReqOp
	switch req.Op {
	case ublk.IOOpRead:
		op = engine.ReqRead
	case ublk.IOOpWrite:
		op = engine.ReqWrite
	case ublk.IOOpFlush:
		op = engine.ReqFlush
	case ublk.IOOpDiscard:
		op = engine.ReqDiscard
	case ublk.IOOpWriteZeroes:
		op = engine.ReqWriteZeroes
	default:
		h.inflight.Store(h.inflight.Load() - 1) // (not Complete: no buffer of it to give back)
		h.q.Complete(req.Tag, unix.EOPNOTSUPP)
		return
	}
	h.bytes[req.Tag] = req.Bytes()
	h.exec.Start(req.Tag, op, req.Sector, req.Sectors, req.Flags&ublk.IOFlagFUA != 0, req.Buf)
}

// Submit implements engine.Backend: one SQE per member operation.
func (h *queue) Submit(tag uint16, op engine.OpID, io engine.MemberIO, data []byte) {
	d := h.a.current[io.Member].Load()
	s := h.sent[tag]
	for len(s) <= op.Index() {
		s = append(s, nil) // grows once per tag to its largest plan
	}
	s[op.Index()] = d
	h.sent[tag] = s
	var m *Member
	if d != nil {
		m = d.m
	}
	if m == nil {
		// Removed after this operation was planned: the engine plans
		// none for a faulty member, so only a race with remove gets here.
		h.exec.Done(tag, op, -int32(unix.EIO))
		return
	}
	if m != h.fixed[io.Member] {
		h.syncFile(int(io.Member))
	}
	if io.Kind != engine.IOFlush && m.lateWrites.Load() > 0 {
		// A given-up write is still out on it (see Member.lateWrites):
		// busy, not failing.
		h.exec.Done(tag, op, -int32(unix.EAGAIN))
		return
	}
	fixed := m == h.fixed[io.Member]
	off := h.a.dataOffset + io.Sector<<9
	if io.Log {
		off = h.a.logOffset + io.Sector<<9 // (within the log area: the entry's size is bounded by its ring)
	}
	m.out[h.shard].n.Add(1) // (until it returns: OnCompletion, or Stale once given up)
	if err := h.q.SubmitMember(uint64(tag)<<32|uint64(op), tag, m, fixed, io, off, data); err != nil {
		m.out[h.shard].n.Add(-1)
		// The ring could not take it: a failure of this queue, not of
		// the member (an EIO here failed a healthy member, or with every
		// member's operations refused, the array). The queue ends and the
		// device waits for a recovery (ublk.Device.Failed), which
		// reissues the request; it is never completed here.
		h.q.Fail(fmt.Errorf("member %d I/O: %w", io.Member, err))
		h.ringFailed = true
	}
}

// OnCompletion implements ublk.QueueHandler.
func (h *queue) OnCompletion(userData uint64, res int32) {
	tag, op := uint16(userData>>32), engine.OpID(uint32(userData))
	if !h.givenUp(tag, op) {
		// Not given up: its request waits for it, so the device it was
		// sent to is still the one sent records (a given-up one's is
		// counted out by Stale: its tag may serve another request now).
		if s := h.sent[tag]; op.Index() < len(s) && s[op.Index()] != nil && s[op.Index()].m != nil {
			s[op.Index()].m.out[h.shard].n.Add(-1)
		}
	}
	h.exec.Done(tag, op, res)
}

// givenUp reports whether operation op of tag was given up (Abandon) and
// has not returned.
func (h *queue) givenUp(tag uint16, op engine.OpID) bool {
	for _, q := range h.quarantine {
		if q.tag == tag && q.op == op {
			return true
		}
	}
	return false
}

// Complete implements engine.Backend. A request that gave up a member
// read or write leaves its buffer to that operation (a read may still
// land in it, a write still read from it) and takes the spare reserved
// for it, with its data (unless a Rebuffer took it already: the buffer
// is then one no operation given up uses).
func (h *queue) Complete(tag uint16, err error) {
	h.inflight.Store(h.inflight.Load() - 1)
	if h.spare[tag] >= 0 {
		h.swap(tag)
	}
	if h.open[tag] {
		// The buffers it left are the quarantine's now: free once its
		// operations given up have all come back (maybe already).
		h.open[tag] = false
		for i := range h.held {
			if b := &h.held[i]; b.tag == tag && b.open {
				b.open = false
			}
		}
		h.releaseHeld(tag)
	}
	h.q.Complete(tag, err)
}

// Rebuffer implements engine.Backend: the request that gave up a read
// takes the spare Abandon reserved, with its data; the old buffer is held
// until the request has completed and its operations given up are back.
func (h *queue) Rebuffer(tag uint16) []byte {
	if h.spare[tag] < 0 {
		panic("array: Rebuffer without a reserved buffer")
	}
	h.swap(tag)
	return h.q.Buffer(tag)
}

// swap gives tag the spare reserved for it, with its data, and holds the
// old buffer (its request still running).
func (h *queue) swap(tag uint16) {
	sp := h.spare[tag]
	h.spare[tag] = -1
	old := h.q.SwapBuffer(tag, sp, h.bytes[tag])
	h.held = append(h.held, heldBuf{tag: tag, buf: old, open: true})
	h.open[tag] = true
}

// releaseHeld frees the buffers requests of tag left, once they have
// completed and no operation of tag given up is still out. By tag, not by
// request: a raid5/6 request's operations take a new OpID sequence with
// each plan; an older request's late operation only delays the release
// (on the worst day).
func (h *queue) releaseHeld(tag uint16) {
	for _, q := range h.quarantine {
		if q.tag == tag {
			return
		}
	}
	kept := h.held[:0]
	for _, b := range h.held {
		if b.tag == tag && !b.open {
			h.q.ReleaseBuffer(b.buf)
			continue
		}
		kept = append(kept, b)
	}
	h.held = kept
}

// quarantined is a member operation given up after the member timeout:
// the buffers its request used are not reused until it returns (heldBuf),
// and no rebuild writes the device before it has (late).
type quarantined struct {
	tag  uint16
	op   engine.OpID
	late lateKey
	// lateWrite: a write's member, whose lateWrites it counts in
	lateWrite *Member
	// dev: the member it was sent to, whose out it counts in
	dev *Member
}

// heldBuf is a buffer a request of tag left (Rebuffer, or Complete after
// giving up an operation): an operation given up may still use it. It is
// freed once the request has completed (open false) and no operation of
// tag given up is out.
type heldBuf struct {
	tag  uint16
	buf  int
	open bool
}

// Abandon implements engine.Backend: a read or a write may be given up
// only with a spare buffer for its tag. Both keep using the tag's buffer
// until they return: a late read lands in it, and a late write is read
// from it whenever the hung device gets to it; so the request, once it
// completes, takes the spare and the old buffer waits in quarantine
// (otherwise the next request's data would be what a late write puts on
// the member, under a sector it never wrote). The operation counts as
// late I/O on its device until it returns (Stale): a late write landing
// after a rebuild of that device (re-add) would undo it.
//
// On a zero-copy queue the buffer is the request's own pages, which the
// kernel keeps until every operation on them has returned: the request
// completes then, whatever the handler committed. A write is still given
// up (its member failed, so that later requests leave it alone), with no
// spare: nothing else can be put in those pages. A read is not: another
// copy's data would go into the same pages, where the late read could
// land over it; it waits for the member (or its driver's own timeout),
// as md does, while the executor fails its member at the timeout all the
// same.
func (h *queue) Abandon(tag uint16, op engine.OpID, io engine.MemberIO) bool {
	zc := h.q.ZeroCopy()
	if zc && io.Kind == engine.IORead {
		return false
	}
	if !zc && (io.Kind == engine.IORead || io.Kind == engine.IOWrite) && h.spare[tag] < 0 {
		sp, ok := h.q.ReserveBuffer()
		if !ok {
			return false
		}
		h.spare[tag] = sp
	}
	// The device it went to, which the role may no longer hold.
	var m *Member
	if d := h.sentTo(tag, op, io); d != nil {
		m = d.m
	}
	key := lateBegin(m)
	var lw *Member
	if m != nil && io.Kind != engine.IORead && io.Kind != engine.IOFlush {
		m.lateWrites.Add(1)
		lw = m
	}
	h.quarantine = append(h.quarantine, quarantined{tag: tag, op: op, late: key, lateWrite: lw, dev: m})
	return true
}

// sentTo is the role device operation op of request tag was submitted to.
func (h *queue) sentTo(tag uint16, op engine.OpID, io engine.MemberIO) *roleDevice {
	if s := h.sent[tag]; op.Index() < len(s) {
		return s[op.Index()]
	}
	return h.a.current[io.Member].Load() // (never: only submitted operations are asked about)
}

// Departed implements engine.Backend: the operation went to a device its
// role no longer holds (replaced, removed or re-added since: a re-added
// device's operations from before its failure are not the role's).
func (h *queue) Departed(tag uint16, op engine.OpID, io engine.MemberIO) bool {
	return h.sentTo(tag, op, io) != h.a.current[io.Member].Load()
}

// Stale implements engine.Backend: an abandoned operation came back; the
// buffers its request left are free again once the request has completed
// and no other operation of it given up is out.
func (h *queue) Stale(tag uint16, op engine.OpID) {
	for i, q := range h.quarantine {
		if q.tag != tag || q.op != op {
			continue
		}
		h.quarantine = append(h.quarantine[:i], h.quarantine[i+1:]...)
		lateEnd(q.late)
		if q.lateWrite != nil {
			q.lateWrite.lateWrites.Add(-1)
		}
		if q.dev != nil {
			q.dev.out[h.shard].n.Add(-1)
		}
		h.releaseHeld(tag)
		return
	}
}

// OnTick implements ublk.Ticker: give up member I/O that hangs.
//
// A queue whose ring refused a member operation gives nothing up any
// more: the refused operations were never issued, yet the executor counts
// them in flight since their submission, and the drain of the failed
// queue outlasts the member timeout. Given up, they failed healthy
// members durably, counted late I/O that never returns (refusing rebuild
// and re-add of those devices), and completed the request with EIO where
// the next server was to reissue it.
func (h *queue) OnTick() {
	if h.ringFailed {
		return
	}
	h.exec.Tick()
	h.syncFiles()
}

// Persist implements engine.Backend: the superblocks are updated
// synchronously on this queue's thread (a member failure is rare; the
// queue stalls for the superblock writes).
func (h *queue) Persist(st *engine.ArrayState) {
	if err := h.a.persist(st); err != nil && h.a.durable.Load() < st.Gen {
		// No member took the new state: the writes waiting for it cannot
		// be acknowledged as durable.
		h.exec.PersistFailed(err)
		return
	}
	h.exec.Persisted(h.a.durable.Load())
}

// Close implements ublk.QueueHandler. The queue stays in the array's
// map: its counters still count (metrics, the stop log), and a late wake-up
// of a stopped queue does nothing.
func (h *queue) Close() { h.closed.Store(true) }

// CheckDevice implements ublk.DeviceChecker: a recovered device keeps the
// parameters it was made with, which the array must take
// (ublk.ServesDevice): a device larger than the array is another array's
// (a filesystem on it would write into this one). A smaller device is a
// grow whose resize has not happened yet (the daemon finishes it).
func (a *Array) CheckDevice(dev ublk.Params) error { return ublk.ServesDevice(dev, a.Params()) }
