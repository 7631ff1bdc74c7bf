package ublk

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring is one io_uring instance: mmap'd submission and completion queues
// read and written through typed atomics. A Ring is not safe for concurrent
// use; a queue ring belongs to its queue's locked OS thread.
type Ring struct {
	fd       int
	flags    uint32
	features uint32

	sqRing, cqRing, sqeMem []byte // the mmaps; kept for munmap

	sqHead    *atomic.Uint32 // written by the kernel
	sqTail    *atomic.Uint32 // written by us
	sqFlags   *atomic.Uint32
	sqMask    uint32
	sqEntries uint32
	sqes      []SQE // with SQE128, entry i is sqes[2*i]; sqes[2*i+1] is its command tail
	sqeShift  uint32
	tail      uint32 // next SQE to hand out (not yet visible to the kernel)

	cqHead    *atomic.Uint32 // written by us
	cqTail    *atomic.Uint32 // written by the kernel
	cqMask    uint32
	cqEntries uint32
	cqes      []CQE

	// timespecs gives each SQE slot a stable place for a timeout operand;
	// the kernel copies it during submission.
	timespecs []kernelTimespec
	// waitTs and waitArg are WaitTimeout's operands, whose addresses the
	// kernel is given: here, off any goroutine stack, which moves when it
	// grows (a uintptr to a stack variable is not updated).
	waitTs  kernelTimespec
	waitArg ioUringGeteventsArg

	// sysEnter is io_uring_enter (a test may wrap it to inject errnos).
	sysEnter func(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, unix.Errno)
}

func ioUringEnter(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, unix.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), uintptr(arg), argSize)
	return int(n), errno
}

// busyBackoff is how long enter sleeps before it retries a submission the
// kernel could not take (EAGAIN: no memory for a request; EBUSY: the
// completion queue overflowed) while no completion is there to reap.
// Both are transient: failing the queue instead would fail the device and
// every request of a mounted filesystem.
func busyBackoff(try int) time.Duration {
	return 50 * time.Microsecond << min(try, 7) // up to 6.4 ms
}

// busyGiveUp is how long enter goes on retrying such refusals before it
// returns the error after all (a variable for tests): a refusal that
// lasts is no transient one, and a queue thread retrying it for good
// would hang there, its device's requests with it, and never see a
// detach or a stop (detachDrain is as long).
var busyGiveUp = 10 * time.Second

// RingOptions select io_uring_setup flags.
type RingOptions struct {
	// SQE128 makes 128-byte SQEs (needed for ublk control commands).
	SQE128 bool
	// CQEntries, if non-zero, sizes the completion queue (IORING_SETUP_CQSIZE).
	CQEntries uint32
	// SingleIssuer asks for COOP_TASKRUN|SINGLE_ISSUER; if the kernel
	// refuses them the ring is created without.
	SingleIssuer bool
	// DeferTaskrun (with SingleIssuer) also asks for DEFER_TASKRUN: task
	// work, including ublk's request dispatch and member completions, runs
	// only inside this thread's io_uring_enter(GETEVENTS).
	DeferTaskrun bool
	// TaskrunFlag (with SingleIssuer) also asks for TASKRUN_FLAG: the
	// kernel flags pending task work in the SQ ring (TaskworkPending), so a
	// polling thread knows when to enter the kernel.
	TaskrunFlag bool
}

// ErrRingFull is returned when a submission queue entry is wanted and the
// submission queue is full even after submitting what was queued.
var ErrRingFull = errors.New("io_uring: submission queue full")

// NewRing creates an io_uring with at least entries submission slots.
func NewRing(entries uint32, o RingOptions) (*Ring, error) {
	var flags uint32 = setupClamp
	if o.SQE128 {
		flags |= setupSQE128
	}
	if o.CQEntries != 0 {
		flags |= setupCQSize
	}
	try := []uint32{flags}
	if o.SingleIssuer {
		coop := uint32(setupCoopTaskrun)
		if o.TaskrunFlag {
			coop |= setupTaskrunFlag
		}
		try = []uint32{flags | coop | setupSingleIssuer, flags | coop, flags}
		if o.DeferTaskrun {
			// Task work is then deferred to GETEVENTS: TASKRUN_FLAG is the
			// only way a polling thread learns that some is pending.
			deferred := flags | setupSingleIssuer | setupDeferTaskrun
			if o.TaskrunFlag {
				deferred |= setupTaskrunFlag
			}
			try = append([]uint32{deferred}, try...)
		}
	}
	var (
		p   ioUringParams
		fd  int
		err error
	)
	for _, f := range try {
		p = ioUringParams{Flags: f, CqEntries: o.CQEntries}
		fd, err = ioUringSetup(entries, &p)
		if err != unix.EINVAL {
			break
		}
	}
	if err != nil {
		if err == unix.ENOSYS || err == unix.EPERM {
			return nil, fmt.Errorf("io_uring_setup: %w (io_uring disabled? see /proc/sys/kernel/io_uring_disabled)", err)
		}
		return nil, fmt.Errorf("io_uring_setup: %w", err)
	}
	r := &Ring{fd: fd, flags: p.Flags, features: p.Features, sysEnter: ioUringEnter}
	if err := r.mmap(&p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func ioUringSetup(entries uint32, p *ioUringParams) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

func (r *Ring) mmap(p *ioUringParams) error {
	if p.Features&featSingleMmap == 0 {
		return errors.New("io_uring: kernel lacks IORING_FEAT_SINGLE_MMAP (need Linux 5.4+)")
	}
	sqeSize := uintptr(unsafe.Sizeof(SQE{}))
	if p.Flags&setupSQE128 != 0 {
		sqeSize *= 2
		r.sqeShift = 1
	}
	sqLen := int(p.SqOff.Array) + int(p.SqEntries)*4
	cqLen := int(p.CqOff.Cqes) + int(p.CqEntries)*int(unsafe.Sizeof(CQE{}))
	ringLen := max(sqLen, cqLen)
	var err error
	r.sqRing, err = unix.Mmap(r.fd, offSQRing, ringLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("io_uring: mmap rings: %w", err)
	}
	r.cqRing = r.sqRing
	r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.SqEntries)*int(sqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("io_uring: mmap sqes: %w", err)
	}
	u32 := func(b []byte, off uint32) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead = u32(r.sqRing, p.SqOff.Head)
	r.sqTail = u32(r.sqRing, p.SqOff.Tail)
	r.sqFlags = u32(r.sqRing, p.SqOff.Flags)
	r.sqMask = *(*uint32)(unsafe.Pointer(&r.sqRing[p.SqOff.RingMask]))
	r.sqEntries = p.SqEntries
	array := unsafe.Slice((*uint32)(unsafe.Pointer(&r.sqRing[p.SqOff.Array])), p.SqEntries)
	for i := range array {
		array[i] = uint32(i) // SQEs are always consumed in order: identity map, set once
	}
	r.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(&r.sqeMem[0])), int(p.SqEntries)<<r.sqeShift)
	r.cqHead = u32(r.cqRing, p.CqOff.Head)
	r.cqTail = u32(r.cqRing, p.CqOff.Tail)
	r.cqMask = *(*uint32)(unsafe.Pointer(&r.cqRing[p.CqOff.RingMask]))
	r.cqEntries = p.CqEntries
	r.cqes = unsafe.Slice((*CQE)(unsafe.Pointer(&r.cqRing[p.CqOff.Cqes])), p.CqEntries)
	r.tail = r.sqTail.Load()
	r.timespecs = make([]kernelTimespec, p.SqEntries)
	return nil
}

// Close unmaps and closes the ring. In-flight operations are cancelled by
// the kernel.
func (r *Ring) Close() error {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
		r.sqeMem = nil
	}
	if r.sqRing != nil {
		unix.Munmap(r.sqRing)
		r.sqRing, r.cqRing = nil, nil
	}
	r.sqes, r.cqes = nil, nil
	if r.fd >= 0 {
		err := unix.Close(r.fd)
		r.fd = -1
		return err
	}
	return nil
}

// Fd returns the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// SQEntries is the size of the submission queue.
func (r *Ring) SQEntries() uint32 { return r.sqEntries }

// CQEntries is the size of the completion queue.
func (r *Ring) CQEntries() uint32 { return r.cqEntries }

// Flags returns the setup flags the kernel accepted.
func (r *Ring) Flags() uint32 { return r.flags }

// SingleIssuer reports whether the ring was created with
// IORING_SETUP_SINGLE_ISSUER.
func (r *Ring) SingleIssuer() bool { return r.flags&setupSingleIssuer != 0 }

// Space is the number of SQEs that can be taken before submitting.
func (r *Ring) Space() uint32 { return r.sqEntries - (r.tail - r.sqHead.Load()) }

// Pending is the number of SQEs taken but not yet submitted.
func (r *Ring) Pending() uint32 { return r.tail - r.sqTail.Load() }

// GetSQE returns the next free submission entry, zeroed, or nil when the
// submission queue is full.
func (r *Ring) GetSQE() *SQE {
	if r.tail-r.sqHead.Load() >= r.sqEntries {
		return nil
	}
	idx := (r.tail & r.sqMask) << r.sqeShift
	r.tail++
	s := &r.sqes[idx]
	*s = SQE{}
	if r.sqeShift != 0 {
		r.sqes[idx+1] = SQE{}
	}
	return s
}

// NextSQE is GetSQE that submits what is queued when the queue is full.
func (r *Ring) NextSQE() (*SQE, error) {
	if s := r.GetSQE(); s != nil {
		return s, nil
	}
	// The caller is in the middle of handling completions and cannot reap
	// more: a refusal (EAGAIN, EBUSY) is waited out here even with
	// completions ready, which would otherwise leave the SQ full.
	if _, err := r.enterFrom(0, 0, false); err != nil {
		return nil, err
	}
	if s := r.GetSQE(); s != nil {
		return s, nil
	}
	return nil, ErrRingFull
}

// timespecFor returns the stable timeout operand slot of sqe.
func (r *Ring) timespecFor(s *SQE) *kernelTimespec {
	idx := (uintptr(unsafe.Pointer(s)) - uintptr(unsafe.Pointer(&r.sqes[0]))) / unsafe.Sizeof(SQE{}) >> r.sqeShift
	return &r.timespecs[idx]
}

// PrepLinkTimeout fills s as an IORING_OP_LINK_TIMEOUT for the SQE
// before it, which must carry SQEIOLink. If that operation has not
// completed within d it is cancelled (its CQE then carries -ECANCELED) and
// this timeout completes with -ETIME; otherwise the timeout completes with
// -ECANCELED.
func (r *Ring) PrepLinkTimeout(s *SQE, d time.Duration, userData uint64) {
	ts := r.timespecFor(s)
	ts.Sec, ts.Nsec = int64(d/time.Second), int64(d%time.Second)
	s.Opcode = OpLinkTimeout
	s.Fd = -1
	s.Addr = uint64(uintptr(unsafe.Pointer(ts)))
	s.Len = 1
	s.UserData = userData
}

// PrepTimeout fills s as a standalone IORING_OP_TIMEOUT of duration d.
func (r *Ring) PrepTimeout(s *SQE, d time.Duration, userData uint64) {
	r.PrepLinkTimeout(s, d, userData)
	s.Opcode = OpTimeout
}

// Submit makes queued SQEs visible to the kernel and submits them without
// waiting.
func (r *Ring) Submit() (int, error) { return r.enter(0, 0) }

// SubmitAndWait submits queued SQEs and waits until at least waitNr
// completions are available, in one io_uring_enter call.
func (r *Ring) SubmitAndWait(waitNr uint32) (int, error) {
	var flags uint32
	if waitNr > 0 {
		flags = enterGetEvents
	}
	return r.enter(waitNr, flags)
}

// WaitTimeout submits queued SQEs and waits for at least one completion
// or until d passes; it returns unix.ETIME on timeout.
func (r *Ring) WaitTimeout(d time.Duration) error {
	ts, arg := &r.waitTs, &r.waitArg
	*ts = kernelTimespec{Sec: int64(d / time.Second), Nsec: int64(d % time.Second)}
	*arg = ioUringGeteventsArg{Ts: uint64(uintptr(unsafe.Pointer(ts)))}
	deadline := time.Now().Add(d)
	for {
		if r.CQReady() > 0 {
			return nil
		}
		toSubmit := r.flush()
		_, errno := r.sysEnter(r.fd, toSubmit, 1, enterGetEvents|enterExtArg, unsafe.Pointer(arg), unsafe.Sizeof(*arg))
		switch errno {
		case 0:
			if r.CQReady() > 0 {
				return nil
			}
		case unix.EINTR:
		case unix.EAGAIN, unix.EBUSY:
			if r.CQReady() > 0 {
				return nil
			}
			time.Sleep(min(busyBackoff(0), max(time.Until(deadline), 0)))
		case unix.ETIME:
			if r.CQReady() > 0 {
				return nil
			}
			return unix.ETIME
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIME
		}
		*ts = kernelTimespec{Sec: int64(left / time.Second), Nsec: int64(left % time.Second)}
	}
}

// flush publishes the locally queued SQEs and returns how many the kernel
// has not consumed yet.
func (r *Ring) flush() uint32 {
	if r.sqTail.Load() != r.tail {
		r.sqTail.Store(r.tail)
	}
	return r.tail - r.sqHead.Load()
}

func (r *Ring) enter(waitNr, flags uint32) (int, error) { return r.enterFrom(waitNr, flags, true) }

// enterFrom is enter; reaps says the caller reaps completions when it
// returns, so a refusal with completions ready returns at once (reaping
// them makes room); otherwise it is retried like one with none ready.
func (r *Ring) enterFrom(waitNr, flags uint32, reaps bool) (int, error) {
	var busySince time.Time // (read only once the kernel refuses)
	for busy := 0; ; {
		toSubmit := r.flush()
		if toSubmit == 0 && waitNr == 0 && flags&enterGetEvents == 0 {
			return 0, nil
		}
		if waitNr > 0 && toSubmit == 0 && r.CQReady() >= waitNr {
			return 0, nil
		}
		n, errno := r.sysEnter(r.fd, toSubmit, waitNr, flags, nil, 0)
		switch errno {
		case 0:
			if waitNr > 0 && r.CQReady() < waitNr {
				// A signal cut the wait short after the kernel submitted:
				// it then reports the submission, not EINTR. Wait again.
				continue
			}
			return int(n), nil
		case unix.EINTR:
			// Go's async preemption (SIGURG) interrupts waits; the kernel has
			// consumed whatever it submitted, so flush() recomputes.
			continue
		case unix.EAGAIN, unix.EBUSY:
			// The kernel took nothing: it had no memory for a request
			// (EAGAIN) or a completion backlog (EBUSY). Completions to reap
			// let the caller make room; otherwise wait a little and retry.
			if reaps && r.CQReady() > 0 {
				return 0, nil
			}
			if busy == 0 {
				busySince = time.Now()
			} else if time.Since(busySince) > busyGiveUp {
				return 0, fmt.Errorf("io_uring_enter (refused for %v): %w", busyGiveUp, errno)
			}
			time.Sleep(busyBackoff(busy))
			busy++
		default:
			return 0, fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// TaskworkPending reports whether the kernel has task work queued for the
// ring's thread (IORING_SQ_TASKRUN; only on rings made with TaskrunFlag):
// entering the kernel (Poll) runs it and posts its completions.
func (r *Ring) TaskworkPending() bool { return r.sqFlags.Load()&sqRingTaskrun != 0 }

// Poll submits what is queued and runs pending task work without waiting.
func (r *Ring) Poll() error {
	_, err := r.enter(0, enterGetEvents)
	return err
}

// CQReady is the number of completions waiting to be reaped.
func (r *Ring) CQReady() uint32 { return r.cqTail.Load() - r.cqHead.Load() }

// PeekCQE returns the oldest unreaped completion, or nil.
func (r *Ring) PeekCQE() *CQE {
	head := r.cqHead.Load()
	if head == r.cqTail.Load() {
		return nil
	}
	return &r.cqes[head&r.cqMask]
}

// SeenCQE releases the completion returned by PeekCQE.
func (r *Ring) SeenCQE() { r.cqHead.Add(1) }

// RegisterFiles registers fds as the ring's fixed files (index = position).
func (r *Ring) RegisterFiles(fds []int32) error {
	if len(fds) == 0 {
		return nil
	}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerFiles,
		uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), 0, 0)
	if errno != 0 {
		return fmt.Errorf("io_uring_register(FILES): %w", errno)
	}
	return nil
}

// UpdateFile puts fd (-1: none) into fixed-file slot index. Requests
// already issued keep the file they took; unsubmitted SQEs naming the
// slot see the new one. On a SINGLE_ISSUER ring only the submitter thread
// may call it.
func (r *Ring) UpdateFile(index int, fd int) error {
	fds := [1]int32{int32(fd)}
	up := ioUringFilesUpdate{Offset: uint32(index), Fds: uint64(uintptr(unsafe.Pointer(&fds[0])))}
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerFilesUpd,
		uintptr(unsafe.Pointer(&up)), 1, 0, 0)
	runtime.KeepAlive(&fds)
	if errno != 0 {
		return fmt.Errorf("io_uring_register(FILES_UPDATE): %w", errno)
	}
	if n != 1 {
		return fmt.Errorf("io_uring_register(FILES_UPDATE): %d slots updated", n)
	}
	return nil
}

// RegisterBuffer registers buf as fixed buffer 0, for READ_FIXED /
// WRITE_FIXED at any address inside it. buf must be memory that outlives
// the ring and is never moved (an anonymous mmap).
func (r *Ring) RegisterBuffer(buf []byte) error {
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerBuffers,
		uintptr(unsafe.Pointer(&iov)), 1, 0, 0)
	if errno != 0 {
		return fmt.Errorf("io_uring_register(BUFFERS): %w", errno)
	}
	return nil
}

// RegisterSparseBuffers gives the ring a buffer table of n empty slots
// (IORING_REGISTER_BUFFERS2, sparse), for buffers the kernel registers in
// it: a ublk device with UBLK_F_AUTO_BUF_REG puts each request's pages in
// the slot its FETCH named. It replaces RegisterBuffer: a ring has one
// buffer table.
func (r *Ring) RegisterSparseBuffers(n int) error {
	reg := ioUringRsrcRegister{Nr: uint32(n), Flags: rsrcRegSparse}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerBuffers2,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0, 0)
	if errno != 0 {
		return fmt.Errorf("io_uring_register(BUFFERS2, sparse %d): %w", n, errno)
	}
	return nil
}

// PrepRWSlot fills s for a READ_FIXED or WRITE_FIXED of n bytes at byte
// offset off of fixed file index file, from or to byte bufOff of the
// kernel buffer in buffer-table slot slot (a ublk request's pages, see
// RegisterSparseBuffers: such a buffer's addresses start at 0).
func PrepRWSlot(s *SQE, op uint8, file int32, slot uint16, bufOff uint64, n uint32, off uint64, userData uint64) {
	s.Opcode = op
	s.Flags = SQEFixedFile
	s.Fd = file
	s.Addr = bufOff
	s.Len = n
	s.Off = off
	s.BufIndex = slot
	s.UserData = userData
}

// PrepRW fills s for a read or write (OpRead, OpWrite, OpReadFixed,
// OpWriteFixed) of buf at byte offset off of fixed file index file.
func PrepRW(s *SQE, op uint8, file int32, buf []byte, off uint64, userData uint64) {
	s.Opcode = op
	s.Flags = SQEFixedFile
	s.Fd = file
	s.Addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	s.Len = uint32(len(buf))
	s.Off = off
	s.UserData = userData
}

// PrepFsync fills s for an fsync (flags: FsyncDatasync) of fixed file index file.
func PrepFsync(s *SQE, file int32, flags uint32, userData uint64) {
	s.Opcode = OpFsync
	s.Flags = SQEFixedFile
	s.Fd = file
	s.OpFlags = flags
	s.UserData = userData
}

// PrepFallocate fills s for fallocate(mode, off, length) on fixed file index file.
func PrepFallocate(s *SQE, file int32, mode uint32, off, length uint64, userData uint64) {
	s.Opcode = OpFallocate
	s.Flags = SQEFixedFile
	s.Fd = file
	s.Off = off
	s.Addr = length
	s.Len = mode
	s.UserData = userData
}

// PrepBlockDiscard fills s for BLOCK_URING_CMD_DISCARD of [off, off+length)
// on the block device at fixed file index file (Linux 6.12+).
func PrepBlockDiscard(s *SQE, file int32, off, length uint64, userData uint64) {
	s.Opcode = OpURingCmd
	s.Flags = SQEFixedFile
	s.Fd = file
	s.Off = uint64(blockURingCmdDiscard) // cmd_op
	s.Addr = off
	s.Addr3 = length
	s.UserData = userData
}

// PrepNop fills s as a no-op.
func PrepNop(s *SQE, userData uint64) {
	s.Opcode = OpNop
	s.Fd = -1
	s.UserData = userData
}

// cmdArea returns sqe->cmd, the uring_cmd payload area that starts at byte
// 48 of the SQE (16 bytes on a 64-byte ring, 80 on an SQE128 ring).
func (s *SQE) cmdArea() unsafe.Pointer { return unsafe.Pointer(&s.Addr3) }
