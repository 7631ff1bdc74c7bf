package ublk

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The batched queue path (UBLK_F_BATCH_IO, Linux 7.0+; Config.BatchIO).
//
// The kernel facts it relies on (drivers/block/ublk_drv.c, 7.0):
//   - A batch device refuses FETCH_REQ/COMMIT_AND_FETCH_REQ. A queue is
//     made ready by PREP_IO_CMDS, an array of elements naming every tag
//     (and, per tag, the buffer-table slot for AUTO_BUF_REG or the buffer
//     address for the copy path). It completes at once; the queue is ready
//     when every tag was prepared.
//   - FETCH_IO_CMDS is a multishot uring_cmd (IORING_URING_CMD_MULTISHOT,
//     IOSQE_BUFFER_SELECT, buffer group in sqe->buf_index). For each batch
//     of requests the driver takes one buffer of the group, writes the
//     requests' tags into it (__u16 each, at most 128 per CQE) and posts a
//     CQE with res = bytes written and IORING_CQE_F_MORE while it stays
//     armed. It ends (no F_MORE) with -ENOBUFS when it found no buffer or
//     could not post (the tags go back to its queue and are delivered to
//     the next fetch), and with UBLK_IO_RES_ABORT (-ENODEV) when the
//     device stops or the ring goes away.
//   - COMMIT_IO_CMDS takes an array of elements {tag, buf_index, result}
//     (+ buffer address on the copy path), read when the command is
//     issued; it returns the bytes of the array it consumed, stopping at
//     the first refused element. On an AUTO_BUF_REG device it unregisters
//     the request's buffer from the committing ring's table and records
//     buf_index as the slot for the tag's next request; both are the tag
//     here, as on the per-tag path.
//   - Requests' buffers are registered in (and must be unregistered
//     from) the ring that issued the fetch: one ring per queue, as here.
//   - The driver does not tie a batch device's tags to a task
//     (PER_IO_DAEMON is cleared for it); this package still issues
//     everything from the queue's thread.

// batchUserData marks the completions of the batch commands: bit 61, with
// the command kind in bits 16..23 and an index below.
const (
	batchUserData = 1 << 61
	batchPrep     = 1 << 16
	batchFetch    = 2 << 16
	batchCommit   = 3 << 16
	batchKindMask = 0xff << 16
)

// nCommitBufs is how many commit arrays a queue has: one collects this
// turn's completions while the kernel may still hold the others (it reads
// an array when the command is issued, during the io_uring_enter that
// submits it, so in practice one is free again by the next turn).
const nCommitBufs = 4

// Commit array states.
const (
	commitFree     uint8 = iota
	commitOpen           // collecting completions
	commitInflight       // COMMIT_IO_CMDS submitted, CQE to come
)

// fetchGroup is the provided-buffer group the fetch uses (one ring per
// queue, so one group is enough).
const fetchGroup = 0

// maxTagsPerCQE is the most tags the driver writes per fetch CQE.
const maxTagsPerCQE = 128

// batchQueue is a Queue's batch state.
type batchQueue struct {
	elemBytes int    // 8, or 16 with the buffer address (copy path)
	flags     uint16 // UBLK_BATCH_F_HAS_BUF_ADDR on the copy path

	commitMem  []byte // nCommitBufs arrays of depth elements, off the Go heap
	commitSize int    // bytes per array
	commitN    [nCommitBufs]int
	commitSt   [nCommitBufs]uint8
	open       int // the commitOpen array
	inflight   int // commit commands without CQE

	pbufMem  []byte       // the provided-buffer ring's entries (page aligned)
	pbufs    []ioUringBuf // its entries; entry 0's Resv is the tail
	pbufMask uint16
	pbufTail uint16
	tagMem   []byte // the tag buffers
	tagBuf   int    // bytes per tag buffer

	fetchArmed bool
	fetchDead  bool // aborted: the device stopped
	prepDone   bool
	prepRes    int32
}

func newBatchQueue(q *Queue) (*batchQueue, error) {
	b := &batchQueue{elemBytes: int(unsafe.Sizeof(ublkElemHeader{}))}
	if !q.zeroCopy {
		b.elemBytes += 8
		b.flags = batchFHasBufAddr
	}
	b.commitSize = roundUp(q.depth*b.elemBytes, 64)
	var err error
	b.commitMem, err = unix.Mmap(-1, 0, nCommitBufs*b.commitSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mmap commit arrays: %w", err)
	}
	b.commitSt[0] = commitOpen
	// One tag buffer per possible CQE: every CQE carries at least one
	// request (or none, in which case its buffer is returned at once), so
	// a queue of depth tags never has more than depth buffers out.
	entries := 1
	for entries < q.depth {
		entries <<= 1
	}
	b.tagBuf = 2 * min(q.depth, maxTagsPerCQE)
	pageSize := unix.Getpagesize()
	b.pbufMem, err = unix.Mmap(-1, 0, roundUp(entries*int(unsafe.Sizeof(ioUringBuf{})), pageSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.close()
		return nil, fmt.Errorf("mmap buffer ring: %w", err)
	}
	b.pbufs = unsafe.Slice((*ioUringBuf)(unsafe.Pointer(&b.pbufMem[0])), entries)
	b.pbufMask = uint16(entries - 1)
	b.tagMem, err = unix.Mmap(-1, 0, roundUp(entries*b.tagBuf, pageSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.close()
		return nil, fmt.Errorf("mmap tag buffers: %w", err)
	}
	reg := ioUringBufReg{RingAddr: uint64(uintptr(unsafe.Pointer(&b.pbufMem[0]))), RingEntries: uint32(entries), Bgid: fetchGroup}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(q.ring.Fd()), registerPbufRing,
		uintptr(unsafe.Pointer(&reg)), 1, 0, 0)
	if errno != 0 {
		b.close()
		return nil, fmt.Errorf("io_uring_register(PBUF_RING, %d entries): %w", entries, errno)
	}
	for bid := range entries {
		b.provide(uint16(bid))
	}
	return b, nil
}

// provide puts tag buffer bid (back) into the provided-buffer ring.
func (b *batchQueue) provide(bid uint16) {
	e := &b.pbufs[b.pbufTail&b.pbufMask]
	e.Addr = uint64(uintptr(unsafe.Pointer(&b.tagMem[int(bid)*b.tagBuf])))
	e.Len = uint32(b.tagBuf)
	e.Bid = bid
	b.pbufTail++
	// The tail is entry 0's Resv (bytes 14-15): publish it with one atomic
	// store of entry 0's Bid and Resv, whose Bid only this thread writes.
	// The kernel reads the tail with acquire semantics, so the entry
	// written above is visible once the tail is.
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b.pbufs[0].Bid)), uint32(b.pbufs[0].Bid)|uint32(b.pbufTail)<<16)
}

// elem returns element i of commit array a.
func (b *batchQueue) elem(a, i int) *ublkElemHeader {
	p := unsafe.Pointer(&b.commitMem[a*b.commitSize+i*b.elemBytes])
	return (*ublkElemHeader)(p)
}

// setElem fills element i of array a for tag.
func (q *Queue) setElem(a, i int, tag uint16, res int32) {
	b := q.batch
	e := b.elem(a, i)
	e.Tag = tag
	e.BufIndex = tag // AUTO_BUF_REG: slot = tag
	e.Result = res
	if b.flags&batchFHasBufAddr != 0 {
		*(*uint64)(unsafe.Add(unsafe.Pointer(e), 8)) = uint64(uintptr(unsafe.Pointer(&q.buf(q.bufIdx[tag])[0])))
	}
}

// batchCmd queues a batch uring_cmd.
func (q *Queue) batchCmd(op uint32, userData uint64) (*SQE, *ublkBatchIO, error) {
	s, err := q.ring.NextSQE()
	if err != nil {
		return nil, nil, err
	}
	s.Opcode = OpURingCmd
	s.Flags = 0 // /dev/ublkcN by descriptor, as queueIOCmd
	s.Fd = q.charFd
	s.Off = uint64(op)
	s.UserData = batchUserData | userData
	c := (*ublkBatchIO)(s.cmdArea())
	c.QID = uint16(q.id)
	return s, c, nil
}

// batchStart prepares every tag (PREP_IO_CMDS, waited for: the queue must
// be ready before the fetch is attached) and queues the multishot fetch.
func (q *Queue) batchStart() error {
	b := q.batch
	for tag := range q.depth {
		q.setElem(0, tag, uint16(tag), 0)
	}
	s, c, err := q.batchCmd(ioPrepIOCmds, batchPrep)
	if err != nil {
		return fmt.Errorf("queue %d: queue PREP_IO_CMDS: %w", q.id, err)
	}
	s.Addr = uint64(uintptr(unsafe.Pointer(&b.commitMem[0])))
	s.Len = uint32(q.depth * b.elemBytes)
	c.Flags = b.flags
	c.NrElem = uint16(q.depth)
	c.ElemBytes = uint8(b.elemBytes)
	for !b.prepDone {
		if _, err := q.ring.SubmitAndWait(1); err != nil {
			return fmt.Errorf("queue %d: PREP_IO_CMDS: %w", q.id, err)
		}
		q.reapCQEs()
	}
	if b.prepRes < 0 {
		return fmt.Errorf("queue %d: PREP_IO_CMDS: %w", q.id, unix.Errno(-b.prepRes))
	}
	for tag := range q.depth {
		q.state[tag] = tagFetched
	}
	return q.armFetch()
}

func (q *Queue) armFetch() error {
	s, c, err := q.batchCmd(ioFetchIOCmds, batchFetch)
	if err != nil {
		return fmt.Errorf("queue %d: queue FETCH_IO_CMDS: %w", q.id, err)
	}
	s.Flags = SQEBufferSelect
	s.BufIndex = fetchGroup
	s.OpFlags = uringCmdMultishot
	c.ElemBytes = 2
	q.batch.fetchArmed = true
	return nil
}

// batchCommit adds tag's commit to the open array; batchFlush submits it.
func (q *Queue) batchCommit(tag uint16, res int32) {
	b := q.batch
	n := b.commitN[b.open]
	if n >= q.depth {
		// Each tag is in the open array at most once (it is not fetched
		// again before its commit is submitted): a bug.
		panic(fmt.Sprintf("ublk: queue %d: commit array overflows at tag %d", q.id, tag))
	}
	q.setElem(b.open, n, tag, res)
	b.commitN[b.open] = n + 1
	q.state[tag] = tagFetched
	if b.fetchDead {
		// The device stopped: the commit still goes out (the kernel ends
		// the request), and the tag is done.
		q.state[tag] = tagDead
		q.live--
	}
}

// batchBusy reports whether batch commands are still to be submitted or
// completed.
func (q *Queue) batchBusy() bool {
	return q.batch != nil && (q.batch.commitN[q.batch.open] > 0 || q.batch.inflight > 0)
}

// batchFlush submits the open commit array, if it has commits and another
// array is free to collect the next ones (else it keeps collecting, and
// goes out once a commit CQE frees an array).
func (q *Queue) batchFlush() {
	b := q.batch
	if b == nil {
		return
	}
	if !b.fetchArmed && !b.fetchDead && !q.detaching() {
		// The fetch ended for want of buffers: the ones it filled are
		// back in the ring now.
		if err := q.armFetch(); err != nil {
			q.fail(err)
		}
	}
	n := b.commitN[b.open]
	if n == 0 {
		return
	}
	next := -1
	for i := range nCommitBufs {
		if b.commitSt[i] == commitFree {
			next = i
			break
		}
	}
	if next < 0 {
		return
	}
	s, c, err := q.batchCmd(ioCommitIOCmds, batchCommit|uint64(b.open))
	if err != nil {
		q.fail(fmt.Errorf("queue %d: cannot queue COMMIT_IO_CMDS: %w", q.id, err))
		return
	}
	s.Addr = uint64(uintptr(unsafe.Pointer(&b.commitMem[b.open*b.commitSize])))
	s.Len = uint32(n * b.elemBytes)
	c.Flags = b.flags
	c.NrElem = uint16(n)
	c.ElemBytes = uint8(b.elemBytes)
	b.commitSt[b.open] = commitInflight
	b.inflight++
	b.open = next
	b.commitSt[next] = commitOpen
	b.commitN[next] = 0
}

// onBatchCQE handles the completion of a batch command.
func (q *Queue) onBatchCQE(ud uint64, res int32, flags uint32) {
	b := q.batch
	if b == nil {
		q.fail(fmt.Errorf("queue %d: batch completion %#x on a per-tag queue", q.id, ud))
		return
	}
	switch ud & batchKindMask {
	case batchPrep:
		b.prepDone, b.prepRes = true, res
	case batchCommit:
		a := int(ud & 0xffff)
		n := b.commitN[a]
		if want := int32(n * b.elemBytes); res != want {
			// The kernel refused an element (and every later one): those
			// requests are lost to this server. A protocol bug on our side.
			err := error(fmt.Errorf("took %d of %d bytes", res, want))
			if res < 0 {
				err = unix.Errno(-res)
			}
			q.fail(fmt.Errorf("queue %d: COMMIT_IO_CMDS of %d requests: %w", q.id, n, err))
		}
		b.commitSt[a] = commitFree
		b.commitN[a] = 0
		b.inflight--
	case batchFetch:
		if flags&cqeFBuffer != 0 {
			bid := uint16(flags >> cqeBufferShift)
			if int(bid) >= len(b.pbufs) || int(res) > b.tagBuf {
				// (Bounded as everything the kernel gives: never read
				// outside the buffer ring or a tag buffer.)
				q.fail(fmt.Errorf("queue %d: FETCH_IO_CMDS gave buffer %d of %d with %d bytes (at most %d)", q.id, bid, len(b.pbufs), res, b.tagBuf))
				return
			}
			if res > 0 {
				tags := unsafe.Slice((*uint16)(unsafe.Pointer(&b.tagMem[int(bid)*b.tagBuf])), int(res)/2)
				for _, tag := range tags {
					if int(tag) >= q.depth || q.state[tag] != tagFetched {
						q.fail(fmt.Errorf("queue %d: fetched tag %d in state %d", q.id, tag, q.state[min(int(tag), q.depth-1)]))
						continue
					}
					q.deliver(tag)
				}
			}
			b.provide(bid)
		}
		if flags&cqeFMore != 0 {
			return
		}
		b.fetchArmed = false
		switch {
		case res >= 0 || res == ioResNoBufs:
			// Out of buffers (or CQ space): batchFlush re-arms it, and the
			// driver delivers the requests it kept to the new fetch.
		case res == ioResAbort:
			q.batchAbort(nil)
		default:
			q.batchAbort(fmt.Errorf("queue %d: FETCH_IO_CMDS failed: %w", q.id, unix.Errno(-res)))
		}
	default:
		q.fail(fmt.Errorf("queue %d: unknown batch completion %#x", q.id, ud))
	}
}

// batchAbort ends the queue's fetching: every tag the kernel holds is
// dead; tags with the handler die at their commit.
func (q *Queue) batchAbort(err error) {
	if err != nil {
		q.fail(err)
	}
	q.batch.fetchDead = true
	for tag, st := range q.state {
		if st == tagFetched || st == tagIdle {
			q.state[tag] = tagDead
			q.live--
		}
	}
}

func (b *batchQueue) close() {
	for _, m := range [][]byte{b.commitMem, b.pbufMem, b.tagMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	b.commitMem, b.pbufMem, b.tagMem, b.pbufs = nil, nil, nil, nil
}
