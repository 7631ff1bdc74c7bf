package ublk

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Tag states, from the server's point of view.
const (
	tagIdle    uint8 = iota // no command in flight (before FETCH)
	tagFetched              // FETCH or COMMIT_AND_FETCH in flight: the kernel owns the tag
	tagServing              // a request is with the handler
	tagDead                 // aborted by the kernel; never used again
)

// Queue is one ublk hardware queue served by one goroutine locked to its
// OS thread (pinned to a CPU of the queue's affinity), owning one io_uring
// ring that carries both the ublk commands and the target's member I/O.
// Its methods must only be called on that thread, from the handler.
type Queue struct {
	id         int
	depth      int
	maxIO      int
	ring       *Ring
	char       *os.File
	charFd     int32 // char's descriptor, for the ublk commands
	descMem    []byte
	descs      []ioDesc
	bufMem     []byte
	reqs       []Request
	state      []uint8
	live       int // tags not dead
	inflight   int // target SQEs without CQE yet
	handler    QueueHandler
	fixedBufs  bool
	zeroCopy   bool // UBLK_F_AUTO_BUF_REG: tag t's request pages are buffer slot t
	err        error
	served     bool      // started serving (an error ends the loop after this)
	failAt     time.Time // when the loop first saw err (its member I/O drains)
	ringBroken bool      // io_uring_enter failed: nothing more to reap
	pollFor    time.Duration
	now        time.Time // see Now
	waker      Waker     // the handler, if it wants wake-ups
	ticker     Ticker    // the handler, if it wants ticks
	// Tag buffers: bufIdx[tag] is the index in bufMem of tag's buffer
	// (tag itself until a swap); spares are free buffers beyond depth.
	bufIdx    []int
	spares    []int
	nbuf      int      // buffers in bufMem (registered); more are in extra
	extra     [][]byte // buffers mapped when the spares ran out (not registered)
	wake      *os.File // eventfd other goroutines write to wake the queue
	wakeMem   []byte   // one page off the Go heap
	wakeBuf   []byte   // its first 8 bytes: the eventfd read's target
	wakeArmed bool     // the eventfd read is in flight
	detach    *atomic.Bool
	detachAt  time.Time   // when the queue saw detach set
	stopAt    time.Time   // when the queue saw its last fetch end (live 0)
	batch     *batchQueue // UBLK_F_BATCH_IO: batched commands instead of per-tag ones (batch.go)
}

// ID is the queue's index.
func (q *Queue) ID() int { return q.id }

// Depth is the number of tags.
func (q *Queue) Depth() int { return q.depth }

// MaxIOBytes is the size of each tag's buffer.
func (q *Queue) MaxIOBytes() int { return q.maxIO }

// FixedBuffers reports whether the tag buffers are registered with the
// ring as fixed buffer 0: targets then use OpReadFixed/OpWriteFixed.
func (q *Queue) FixedBuffers() bool { return q.fixedBufs }

// ZeroCopy reports whether the device has UBLK_F_AUTO_BUF_REG: the
// kernel puts each data request's own pages in the ring's buffer table,
// slot = tag, before Handle, and takes them out at its commit. Request.Buf
// then holds no data (it is address space only, and faults if touched):
// member I/O moves the data with PrepRWSlot, at BufOffset within the
// slot. A READ request's pages can only be read into, a WRITE's only
// written from.
func (q *Queue) ZeroCopy() bool { return q.zeroCopy }

// BufOffset is where data, a part of request tag's Buf, starts within it:
// with ZeroCopy, its offset in the request's buffer slot.
func (q *Queue) BufOffset(tag uint16, data []byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(data))) - uintptr(unsafe.Pointer(unsafe.SliceData(q.reqs[tag].Buf))))
}

// InTagBuf reports whether data lies within request tag's Buf. A target
// may also move data from buffers of its own (a raid5/6 array's stripe
// buffers), which the fixed read and write operations on the tag's
// buffer cannot reach.
func (q *Queue) InTagBuf(tag uint16, data []byte) bool {
	b := q.reqs[tag].Buf
	if len(data) == 0 || len(data) > len(b) {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(data))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p-lo <= uintptr(len(b)-len(data))
}

// TagFixed reports whether tag's buffer is in the registered buffer
// (OpReadFixed/OpWriteFixed may be used on it). It is not after the tag
// took a buffer mapped when the spares had run out (SwapBuffer).
func (q *Queue) TagFixed(tag uint16) bool { return q.fixedBufs && q.bufIdx[tag] < q.nbuf }

// buf is tag buffer i.
func (q *Queue) buf(i int) []byte {
	if i < q.nbuf {
		return q.bufMem[i*q.maxIO : (i+1)*q.maxIO : (i+1)*q.maxIO]
	}
	return q.extra[i-q.nbuf]
}

// SQE returns a zeroed submission entry for target I/O whose completion
// will be delivered to the handler's OnCompletion with userData (which
// must not use bit 63). If the ring is full, queued entries are submitted
// first.
func (q *Queue) SQE(userData uint64) (*SQE, error) {
	s, err := q.ring.NextSQE()
	if err != nil {
		return nil, err
	}
	s.UserData = userData | targetBit
	q.inflight++
	return s, nil
}

// Wake makes the queue thread call the handler's OnWake soon (the handler
// must implement Waker). Unlike every other method it may be called from
// any goroutine, also after the queue has stopped (it then does nothing).
// It never blocks.
func (q *Queue) Wake() {
	var one = [8]byte{1}
	q.wake.Write(one[:]) // an eventfd write; EAGAIN (counter full) still wakes
}

// SetTargetFile puts fd (-1: none) into the ring's fixed-file slot of
// Target.Files()[i], so a target can swap a member in or out while it
// serves: requests already issued keep the file they took, and once the
// call returns the ring no longer holds the old file. Queue thread only.
func (q *Queue) SetTargetFile(i, fd int) error {
	return q.ring.UpdateFile(FirstTargetFile+i, fd)
}

// Ring gives targets access to ring helpers such as PrepLinkTimeout.
func (q *Queue) Ring() *Ring { return q.ring }

// Now is the time the queue thread woke up for the completions it is
// handling: one clock read per turn of the loop serves every request and
// member completion of that turn (queue thread only).
func (q *Queue) Now() time.Time { return q.now }

// Complete commits request tag to the kernel with the full byte count
// (err == nil) or a negative errno mapped from err, and fetches the next
// request for the tag. It must be called exactly once per Handle.
func (q *Queue) Complete(tag uint16, err error) {
	if q.state[tag] != tagServing {
		panic(fmt.Sprintf("ublk: queue %d tag %d completed twice or never fetched (state %d)", q.id, tag, q.state[tag]))
	}
	req := &q.reqs[tag]
	if q.batch != nil {
		q.batchCommit(tag, commitResult(req, err))
		return
	}
	q.queueIOCmd(ioCommitAndFetchReq, tag, commitResult(req, err))
}

func (q *Queue) queueIOCmd(op uint32, tag uint16, res int32) {
	s, err := q.ring.NextSQE()
	if err != nil {
		// The ring is full and cannot be submitted: the ring is broken.
		// Mark the tag dead so the queue winds down; the kernel aborts it
		// when the ring closes.
		q.fail(fmt.Errorf("queue %d: cannot queue command for tag %d: %w", q.id, tag, err))
		q.state[tag] = tagDead
		q.live--
		return
	}
	s.Opcode = OpURingCmd
	// /dev/ublkcN by its descriptor, not as a fixed file: on kernels
	// before 6.13 a request on a fixed file pins the ring's file table as
	// it was when the request was issued, and FETCH commands stay in
	// flight as long as their tag idles, so a member file swapped out of
	// the table (SetTargetFile) would never be released.
	s.Flags = 0
	s.Fd = q.charFd
	s.Off = uint64(op)
	s.UserData = uint64(tag)
	c := (*ublksrvIOCmd)(s.cmdArea())
	c.QID = uint16(q.id)
	c.Tag = tag
	c.Result = res
	if q.zeroCopy {
		s.Addr = autoBufRegAddr(tag, 0)
	} else {
		c.Addr = uint64(uintptr(unsafe.Pointer(&q.buf(q.bufIdx[tag])[0])))
	}
	q.state[tag] = tagFetched
}

func (q *Queue) fail(err error) {
	if q.err == nil {
		q.err = err
	}
}

// queueSetup is what a queue needs to start.
type queueSetup struct {
	id, depth, maxIO int
	char             *os.File
	target           Target
	affinity         *unix.CPUSet // nil: do not pin
	fixedBuffers     bool
	zeroCopy         bool
	batchIO          bool // the device has UBLK_F_BATCH_IO
	deferTaskrun     bool
	pollFor          time.Duration
	detach           *atomic.Bool   // set: leave the loop without waiting for aborts (Device.Detach)
	started          func(q *Queue) // told once the queue can be woken
}

// runQueue serves one queue until every tag is aborted by the kernel. ready
// receives nil once all FETCHes are submitted, or the setup error.
func runQueue(s queueSetup, ready chan<- error) (q *Queue, err error) {
	runtime.LockOSThread()
	// The thread is never unlocked: when this goroutine returns, the runtime
	// terminates the thread, so the pinning and PR_SET_IO_FLUSHER die with it.
	q = &Queue{id: s.id, depth: s.depth, maxIO: s.maxIO, char: s.char, pollFor: s.pollFor}
	defer q.finish()
	if err := q.setup(s); err != nil {
		ready <- err
		return q, err
	}
	if q.batch != nil {
		if err := q.batchStart(); err != nil {
			ready <- err
			return q, err
		}
	} else {
		for tag := range q.depth {
			q.queueIOCmd(ioFetchReq, uint16(tag), 0)
		}
	}
	if _, err := q.ring.Submit(); err != nil {
		ready <- fmt.Errorf("queue %d: submit FETCH: %w", q.id, err)
		return q, err
	}
	q.detach = s.detach
	if s.started != nil {
		s.started(q)
	}
	ready <- nil
	q.served = true
	q.loop()
	return q, q.err
}

func (q *Queue) setup(s queueSetup) error {
	if s.affinity != nil {
		if err := unix.SchedSetaffinity(0, s.affinity); err != nil {
			return fmt.Errorf("queue %d: pin to CPUs %v: %w", q.id, *s.affinity, err)
		}
	}
	// Memory reclaim must not wait on I/O to the device this thread serves.
	// Best effort: it needs CAP_SYS_RESOURCE, which a ublk server has.
	_ = unix.Prctl(unix.PR_SET_IO_FLUSHER, 1, 0, 0, 0)
	sq := uint32(min(2*q.depth, 4096))
	ring, err := NewRing(sq, RingOptions{CQEntries: 2 * sq, SingleIssuer: true, DeferTaskrun: s.deferTaskrun,
		TaskrunFlag: s.pollFor > 0})
	if err != nil {
		return fmt.Errorf("queue %d: %w", q.id, err)
	}
	q.ring = ring
	q.charFd = int32(q.char.Fd())
	files := append([]int32{q.charFd}, intsTo32(s.target.Files())...)
	if err := ring.RegisterFiles(files); err != nil {
		return fmt.Errorf("queue %d: %w", q.id, err)
	}
	pageSize := os.Getpagesize()
	off, length := descArea(q.id, q.depth, pageSize)
	q.descMem, err = unix.Mmap(int(q.char.Fd()), off, length, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("queue %d: mmap descriptors of %s: %w", q.id, q.char.Name(), err)
	}
	q.descs = unsafe.Slice((*ioDesc)(unsafe.Pointer(&q.descMem[0])), q.depth)
	// The tag buffers start on a 2 MiB (huge page) boundary: registering
	// a buffer that starts inside a transparent huge page made 6.12 send
	// corrupt requests to the members (virtio I/O errors under ext4).
	nspare := max(2, q.depth/16)
	prot := unix.PROT_READ | unix.PROT_WRITE
	if s.zeroCopy {
		// The request data never passes through these buffers: they
		// only give the target addresses to slice (BufOffset). Mapped
		// inaccessible, a target touching one faults at once instead of
		// serving wrong data.
		prot, nspare = unix.PROT_NONE, 0
	}
	q.bufMem, err = mmapAligned((q.depth+nspare)*q.maxIO, hugePage, prot)
	if err != nil {
		return fmt.Errorf("queue %d: mmap %d I/O buffers: %w", q.id, q.depth, err)
	}
	switch {
	case s.zeroCopy:
		if err := ring.RegisterSparseBuffers(q.depth); err != nil {
			return fmt.Errorf("queue %d: zero copy: %w", q.id, err)
		}
		q.zeroCopy = true
	case s.fixedBuffers:
		q.fixedBufs = ring.RegisterBuffer(q.bufMem) == nil
	}
	// One page for the wake-up eventfd's counter.
	q.wakeMem, err = unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("queue %d: mmap: %w", q.id, err)
	}
	q.wakeBuf = q.wakeMem[:8:8]
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("queue %d: eventfd: %w", q.id, err)
	}
	q.wake = os.NewFile(uintptr(efd), "ublk-queue-wake")
	q.bufIdx = make([]int, q.depth)
	for i := range q.bufIdx {
		q.bufIdx[i] = i
	}
	q.nbuf = q.depth + nspare
	for i := q.depth; i < q.nbuf; i++ {
		q.spares = append(q.spares, i)
	}
	q.reqs = make([]Request, q.depth)
	for i := range q.reqs {
		q.reqs[i].Tag = uint16(i)
		q.reqs[i].Buf = q.bufMem[i*q.maxIO : (i+1)*q.maxIO : (i+1)*q.maxIO]
	}
	q.state = make([]uint8, q.depth)
	q.live = q.depth
	if s.batchIO {
		if q.batch, err = newBatchQueue(q); err != nil {
			return fmt.Errorf("queue %d: batch I/O: %w", q.id, err)
		}
	}
	q.handler, err = s.target.NewQueue(q)
	if err != nil {
		return fmt.Errorf("queue %d: target: %w", q.id, err)
	}
	if w, ok := q.handler.(Waker); ok {
		q.waker = w
	}
	q.armWake() // also how Device.Detach reaches the thread
	if t, ok := q.handler.(Ticker); ok {
		q.ticker = t
		q.armTick()
	}
	return nil
}

const hugePage = 2 << 20

// mmapAligned maps n bytes of anonymous memory starting at a multiple of
// align (a power of two): it maps n+align and unmaps the excess.
func mmapAligned(n, align, prot int) ([]byte, error) {
	m, err := unix.Mmap(-1, 0, n+align, prot, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	start := uintptr(unsafe.Pointer(&m[0]))
	skip := int((uintptr(align) - start%uintptr(align)) % uintptr(align))
	// unix.Munmap only takes whole mappings it made: trim with the raw call.
	if skip > 0 {
		if err := munmapRaw(m[:skip]); err != nil {
			munmapRaw(m)
			return nil, err
		}
	}
	if tail := align - skip; tail > 0 {
		if err := munmapRaw(m[skip+n:]); err != nil {
			munmapRaw(m[skip:])
			return nil, err
		}
	}
	return m[skip : skip+n : skip+n], nil
}

// munmapRaw unmaps the pages of b (from mmapAligned).
func munmapRaw(b []byte) error {
	_, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0)
	if e != 0 {
		return e
	}
	return nil
}

func intsTo32(in []int) []int32 {
	out := make([]int32, len(in))
	for i, v := range in {
		out[i] = int32(v)
	}
	return out
}

// wakeUserData marks the completion of the wake-up eventfd read: bit 63
// (targetBit) clear, and beyond any tag.
const wakeUserData = 1 << 62

// armWake queues a read of the wake-up eventfd; its completion means some
// goroutine called Wake.
func (q *Queue) armWake() {
	s, err := q.ring.NextSQE()
	if err != nil {
		q.fail(fmt.Errorf("queue %d: cannot queue the wake-up read: %w", q.id, err))
		return
	}
	PrepRW(s, OpRead, int32(q.wake.Fd()), q.wakeBuf, 0, wakeUserData)
	s.Flags = 0 // a plain file descriptor, not a fixed file
	q.wakeArmed = true
}

// onWake handles the wake-up read's completion: re-arm, then tell the
// handler (after re-arming, so a Wake during OnWake is not lost).
func (q *Queue) onWake(res int32) {
	q.wakeArmed = false
	if q.live == 0 {
		return // stopping: nothing to wake for
	}
	if res < 0 && res != -int32(unix.EINTR) && res != -int32(unix.EAGAIN) {
		q.fail(fmt.Errorf("queue %d: wake-up read: %w", q.id, unix.Errno(-res)))
	}
	q.armWake()
	if q.waker != nil {
		q.waker.OnWake()
	}
}

// tickUserData marks the completion of the tick timeout.
const tickUserData = 1<<62 | 1

// TickInterval is how often a Ticker handler's OnTick runs.
const TickInterval = time.Second

func (q *Queue) armTick() {
	s, err := q.ring.NextSQE()
	if err != nil {
		q.fail(fmt.Errorf("queue %d: cannot queue the tick: %w", q.id, err))
		return
	}
	q.ring.PrepTimeout(s, TickInterval, tickUserData)
}

func (q *Queue) onTick() {
	if q.live == 0 || q.err != nil {
		// (A failed queue only drains its member I/O for the next
		// server: its handler gives nothing up meanwhile.)
		return
	}
	q.armTick()
	q.ticker.OnTick()
}

// ReserveBuffer takes a spare tag buffer for SwapBuffer, mapping a new one
// when the spares are all taken; false only when that fails. Queue thread.
func (q *Queue) ReserveBuffer() (int, bool) {
	n := len(q.spares)
	if n == 0 {
		// Every spare waits for a late member read or write (a hung
		// member can hold as many as the queue is deep): map another buffer rather
		// than make a request wait for a member that may never answer.
		b, err := unix.Mmap(-1, 0, q.maxIO, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return 0, false
		}
		q.extra = append(q.extra, b)
		return q.nbuf + len(q.extra) - 1, true
	}
	b := q.spares[n-1]
	q.spares = q.spares[:n-1]
	return b, true
}

// SwapBuffer gives tag the reserved buffer spare, with the first n bytes
// of its current buffer copied into it, and returns the old buffer (to
// ReleaseBuffer once no member I/O uses it any more: an abandoned member
// read may still land there, an abandoned write still be read from it). Queue thread; before the tag completes.
func (q *Queue) SwapBuffer(tag uint16, spare, n int) (old int) {
	buf := q.buf(spare)
	copy(buf[:n], q.reqs[tag].Buf[:n])
	old = q.bufIdx[tag]
	q.bufIdx[tag] = spare
	q.reqs[tag].Buf = buf
	return old
}

// Buffer is request tag's buffer now (SwapBuffer gives it another).
// Queue thread.
func (q *Queue) Buffer(tag uint16) []byte { return q.reqs[tag].Buf }

// ReleaseBuffer returns a buffer from SwapBuffer or ReserveBuffer to the
// spares. Queue thread.
func (q *Queue) ReleaseBuffer(b int) { q.spares = append(q.spares, b) }

// drainWait is how long a draining queue (detaching, failed or stopped)
// waits for a completion before it looks at its drain deadline again.
const drainWait = 100 * time.Millisecond

// yieldEvery is how often a busy queue thread lets the Go scheduler run
// (below the runtime's 10 ms forced-preemption period).
const yieldEvery = 5 * time.Millisecond

// loop is the queue's event loop: one io_uring_enter per turn submits what
// the previous turn queued (commits, member I/O) and waits for at least one
// completion. With pollFor set, after activity the thread first polls for
// up to pollFor: the kernel then flags new work in the ring instead of
// waking a sleeping thread, which saves a cross-CPU wake-up per hand-off at
// the price of spinning while I/O flows.
func (q *Queue) loop() {
	q.now = time.Now()
	lastYield := q.now
	for q.live > 0 || q.inflight > 0 || q.batchBusy() {
		if q.err != nil {
			// A failure of ours or a protocol error: the queue leaves
			// (the device hands every queue over, Device.Failed), its
			// requests not committed wait for the next server. As for a
			// detach, no new request goes to the handler (deliver) and
			// the member I/O in flight is reaped first, within
			// detachDrain, so that none lands after the next server
			// took over; unless the ring itself failed (nothing more
			// comes back through it).
			if q.failAt.IsZero() {
				q.failAt = q.now
			}
			if q.ringBroken || q.inflight == 0 || q.now.Sub(q.failAt) > detachDrain {
				return
			}
		}
		if q.detaching() {
			// Device.Detach: no new request goes to the handler (see
			// onIOCmd); the member I/O in flight is reaped first, so that
			// none lands after the next target took over (closing the
			// ring would not wait for it), within detachDrain.
			if q.inflight == 0 || q.now.Sub(q.detachAt) > detachDrain {
				return
			}
		}
		if q.live == 0 && !q.batchBusy() {
			// Stopped: the kernel ended every fetch once the device's
			// requests had completed, so only operations given up on a
			// hung member are left, whose device may never answer.
			// Reaped within detachDrain; then the queue leaves (one that
			// never returns keeps its device late: array's lateIO), so
			// that del of an array with a hung member ends.
			if q.stopAt.IsZero() {
				q.stopAt = q.now
			}
			if q.now.Sub(q.stopAt) > detachDrain {
				return
			}
		}
		// Yield the P now and then: a goroutine that is never rescheduled
		// looks stuck to the runtime's monitor, which then takes its P away
		// every 10 ms while it waits in io_uring_enter and, having taken
		// one, polls every 20 µs again (measured: a quarter of the server's
		// CPU at 4k QD32 under TCG). A yield every few milliseconds keeps
		// the monitor asleep at the cost of one hand-off.
		if q.now.Sub(lastYield) > yieldEvery {
			runtime.Gosched()
			lastYield = q.now
		}
		q.batchFlush()
		var err error
		draining := q.err != nil || q.detaching() || q.live == 0
		switch {
		case draining:
			// Bounded: a hung member sends no completion, and no tick
			// need come (a handler without one; none is re-armed once
			// the queue stops), yet the drain ends at detachDrain.
			if err = q.ring.WaitTimeout(drainWait); errors.Is(err, unix.ETIME) {
				err = nil
			}
		case q.pollFor > 0 && q.poll():
			err = q.ring.Poll()
		default:
			_, err = q.ring.SubmitAndWait(1)
		}
		if err != nil {
			// The queue fails. Its member I/O is still drained unless the
			// ring cannot give it back: dropped completions (EBADR,
			// reported once) or a refusal that outlasted busyGiveUp
			// leave the ring working (a detaching or stopped queue's
			// too); an error after an earlier one ends the drain.
			q.ringBroken = q.err != nil || !errors.Is(err, unix.EBADR) && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EBUSY)
			q.fail(fmt.Errorf("queue %d: %w", q.id, err))
			continue // (the loop ends on q.err)
		}
		q.now = time.Now()
		q.reapCQEs()
	}
}

// reapCQEs hands every waiting completion to its owner.
func (q *Queue) reapCQEs() {
	for c := q.ring.PeekCQE(); c != nil; c = q.ring.PeekCQE() {
		ud, res, flags := c.UserData, c.Res, c.Flags
		q.ring.SeenCQE()
		switch {
		case ud&targetBit != 0:
			q.inflight--
			q.handler.OnCompletion(ud&^targetBit, res)
		case ud == wakeUserData:
			q.onWake(res)
		case ud == tickUserData:
			q.onTick()
		case ud&batchUserData != 0:
			q.onBatchCQE(ud, res, flags)
		default:
			q.onIOCmd(uint16(ud), res)
		}
	}
}

// poll submits what is queued and spins for up to pollFor until
// completions or task work show up; it reports whether they did.
func (q *Queue) poll() bool {
	if q.ring.Pending() > 0 {
		if _, err := q.ring.Submit(); err != nil {
			return false
		}
	}
	deadline := time.Now().Add(q.pollFor)
	for i := 0; ; i++ {
		if q.ring.CQReady() > 0 || q.ring.TaskworkPending() {
			return true
		}
		if i&63 == 63 && time.Now().After(deadline) {
			return false
		}
	}
}

// detachDrain bounds how long a detaching queue waits for its member I/O
// (a hung member's stays out).
const detachDrain = 10 * time.Second

// detaching reports whether Device.Detach asked the queue to leave, and
// notes when it first saw that.
func (q *Queue) detaching() bool {
	if q.detach == nil || !q.detach.Load() {
		return false
	}
	if q.detachAt.IsZero() {
		q.detachAt = q.now
	}
	return true
}

func (q *Queue) onIOCmd(tag uint16, res int32) {
	if int(tag) >= q.depth {
		q.fail(fmt.Errorf("queue %d: completion for tag %d beyond the queue's depth %d", q.id, tag, q.depth))
		return
	}
	if q.state[tag] != tagFetched {
		q.fail(fmt.Errorf("queue %d: completion for tag %d in state %d", q.id, tag, q.state[tag]))
		return
	}
	switch {
	case res == ioResOK:
		q.deliver(tag)
	case res == ioResAbort:
		q.state[tag] = tagDead
		q.live--
	default:
		// The kernel refused a FETCH/COMMIT (a protocol error on our side).
		q.fail(fmt.Errorf("queue %d: ublk command for tag %d failed: %w", q.id, tag, unix.Errno(-res)))
		q.state[tag] = tagDead
		q.live--
	}
}

// deliver hands the request the kernel put in tag's descriptor to the
// handler.
func (q *Queue) deliver(tag uint16) {
	d := &q.descs[tag]
	req := &q.reqs[tag]
	opFlags := d.OpFlags
	req.Op = uint8(opFlags)
	req.Flags = opFlags >> 8
	req.Sector = d.StartSector
	req.Sectors = d.NrSectors
	q.state[tag] = tagServing
	if q.detaching() || q.err != nil {
		// Left uncommitted: the next server gets it (reissued).
		return
	}
	if req.Bytes() > q.maxIO && (req.Op == IOOpRead || req.Op == IOOpWrite) {
		q.Complete(tag, unix.EINVAL)
		return
	}
	q.handler.Handle(req)
}

// finish closes the handler and the queue's resources. Member I/O still
// in flight (a hung member past detachDrain, or a queue that failed) may
// land after the ring is closed: the kernel holds the pages of its
// buffers, but a buffer on the Go heap (the handler's: stripe buffers, the
// spares of given-up reads) would be freed and reused for other objects
// while the late transfer writes into it. Such a handler is kept
// reachable for the life of the process.
func (q *Queue) finish() {
	if q.handler != nil {
		q.handler.Close()
		if q.inflight > 0 {
			retainForLateIO(q.handler)
		}
	}
	q.close()
}

var (
	lateIOMu sync.Mutex
	// lateIO holds the handlers of queues that ended with member I/O in
	// flight (Queue.finish); never released.
	lateIO []QueueHandler
)

func retainForLateIO(h QueueHandler) {
	lateIOMu.Lock()
	lateIO = append(lateIO, h)
	lateIOMu.Unlock()
}

func (q *Queue) close() {
	if q.ring != nil {
		q.ring.Close() // cancels the wake-up read
	}
	if q.batch != nil {
		q.batch.close()
	}
	if q.wake != nil {
		q.wake.Close() // later Wake calls fail harmlessly on the closed file
	}
	if q.descMem != nil {
		unix.Munmap(q.descMem)
		q.descMem, q.descs = nil, nil
	}
	for _, b := range q.extra {
		unix.Munmap(b)
	}
	q.extra = nil
	if q.bufMem != nil {
		munmapRaw(q.bufMem)
		q.bufMem = nil
	}
	if q.wakeMem != nil {
		unix.Munmap(q.wakeMem)
		q.wakeMem, q.wakeBuf = nil, nil
	}
}

// SetEnterFault makes the queue's io_uring_enter fail with errno while on
// is set: a fault-injection seam for the tests of the layers above (a
// ring failing under a serving queue, see Device.Failed). Call it from the
// target's NewQueue (queue thread).
func (q *Queue) SetEnterFault(on *atomic.Bool, errno unix.Errno) {
	enter := q.ring.sysEnter
	q.ring.sysEnter = func(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, unix.Errno) {
		if on.Load() {
			return 0, errno
		}
		return enter(fd, toSubmit, minComplete, flags, arg, argSize)
	}
}

// Fail ends the queue on err, a failure of the server's own (its ring
// cannot take an operation), not of a member, whose errors are the
// target's to handle: the queue leaves its loop before it waits again, the
// device hands every queue over (Device.Failed), and the requests not
// committed are reissued to the next server. Queue thread.
func (q *Queue) Fail(err error) { q.fail(err) }
