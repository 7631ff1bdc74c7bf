package ublk

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Request is one block request fetched from the kernel. It is owned by
// the queue and valid from Handle until the handler completes it.
type Request struct {
	Tag     uint16
	Op      uint8  // IOOpRead, IOOpWrite, ...
	Flags   uint32 // IOFlagFUA, IOFlagNoUnmap (UBLK_IO_F_* >> 8)
	Sector  uint64 // first 512-byte sector
	Sectors uint32 // length in 512-byte sectors
	// Buf is the tag's I/O buffer, MaxIOBytes long, outside the Go heap.
	// For a WRITE the kernel has copied the data into Buf[:Bytes()]
	// before Handle; for a READ the handler fills it before completing.
	Buf []byte
}

// Bytes is the request's length in bytes.
func (r *Request) Bytes() int { return int(r.Sectors) << 9 }

// Offset is the request's starting byte offset on the device.
func (r *Request) Offset() uint64 { return r.Sector << 9 }

// Data is the part of Buf that the request reads or writes.
func (r *Request) Data() []byte { return r.Buf[:r.Bytes()] }

// Target is what a ublk device serves: it opens the files it needs and
// makes one handler per queue.
type Target interface {
	// Files lists the file descriptors the target's SQEs use. The queue
	// registers them in its ring: Files()[i] is fixed file FirstTargetFile+i.
	Files() []int
	// NewQueue is called on queue q's own locked OS thread before the
	// queue fetches anything. The handler is only ever called on that
	// thread, so it needs no locking.
	NewQueue(q *Queue) (QueueHandler, error)
}

// ZeroCopyTarget is implemented by targets whose handlers can serve a
// zero-copy queue (Queue.ZeroCopy): they never touch Request.Buf and move
// data only with member I/O on the request's buffer slot (PrepRWSlot).
// Create then asks for UBLK_F_AUTO_BUF_REG where the driver offers it.
type ZeroCopyTarget interface {
	Target
	ZeroCopy() bool
}

// QueueHandler serves the requests of one queue.
type QueueHandler interface {
	// Handle starts serving req. The handler must call q.Complete(req.Tag,
	// err) exactly once: directly, or later from OnCompletion, after the
	// member I/O it queued with q.SQE finishes. Handle must not block.
	Handle(req *Request)
	// OnCompletion delivers the CQE of an SQE the handler queued with
	// q.SQE, with the userData it gave (bit 63 cleared).
	OnCompletion(userData uint64, res int32)
	// Close is called on the queue thread after the queue has stopped.
	Close()
}

// Waker is implemented by handlers that other goroutines wake with
// Queue.Wake (for example to resume requests that waited for the
// write-intent bitmap). OnWake runs on the queue thread; a burst of Wake
// calls may give one OnWake.
type Waker interface {
	OnWake()
}

// Ticker is implemented by handlers that want OnTick called on the queue
// thread every TickInterval (for example to give up member I/O that hangs).
type Ticker interface {
	OnTick()
}

// FirstTargetFile is the fixed-file index of Target.Files()[0] in every
// queue ring (index 0 is the ublk character device).
const FirstTargetFile = 1

// targetBit marks the user data of target SQEs; ublk commands have it clear.
const targetBit = 1 << 63

// Errno turns a negative CQE result into an error without allocating.
func Errno(res int32) error {
	if res >= 0 {
		return nil
	}
	return unix.Errno(-res)
}

// ErrShortIO reports a member transfer that moved fewer bytes than asked
// and could not be completed.
var ErrShortIO = errors.New("short member I/O")

// commitResult maps the outcome of a request to the value committed to
// the kernel: the full byte count for data requests, 0 for others, or a
// negative errno. It is the one place where errors become errnos. EAGAIN
// (never a valid final answer to the block layer) and anything that is
// not an errno become EIO.
func commitResult(req *Request, err error) int32 {
	if err == nil {
		if req.Op == IOOpRead || req.Op == IOOpWrite {
			return int32(req.Bytes())
		}
		return 0
	}
	errno, ok := err.(unix.Errno) // member CQE errors: no allocation
	if !ok {
		errno = wrappedErrno(err)
	}
	if errno == 0 || errno == unix.EAGAIN || errno >= 4096 {
		return -int32(unix.EIO)
	}
	return -int32(errno)
}

// wrappedErrno digs an errno out of a wrapped error (slow path: it
// allocates), or returns 0.
func wrappedErrno(err error) unix.Errno {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// DeviceChecker is implemented by targets that can tell whether they can
// serve an existing device, whose parameters were set by the server that
// made it: Recover asks before it touches the device, and refuses it on
// an error.
type DeviceChecker interface {
	CheckDevice(dev Params) error
}

// ServesDevice is the common DeviceChecker rule: a target whose own
// parameters are own can serve device dev if it holds all of dev's
// sectors (a smaller target would fail the requests past its end, or a
// file grow under them) and takes dev's logical blocks (smaller ones
// than its members' would fail member I/O with EINVAL), gets FLUSH
// if the target needs it (VOLATILE_CACHE), and is read-only if the
// target is. A device smaller than the
// target is served (its end stays unused).
func ServesDevice(dev, own Params) error {
	d, o := dev.Basic, own.Basic
	switch {
	case d.DevSectors > o.DevSectors:
		return fmt.Errorf("it has %d sectors, more than the %d served here", d.DevSectors, o.DevSectors)
	case d.LogicalBSShift < o.LogicalBSShift:
		return fmt.Errorf("it has %d-byte logical blocks, smaller than the %d-byte ones served here", 1<<d.LogicalBSShift, 1<<o.LogicalBSShift)
	case o.Attrs&AttrVolatileCache != 0 && d.Attrs&AttrVolatileCache == 0:
		// The block layer sends FLUSH (and FUA) only to a device that
		// says it has a volatile cache, and the parameters of a live
		// device do not change: an fsync would return with data in a
		// member's write-back cache. (Made by an older version; del and
		// add make the device anew.)
		return fmt.Errorf("it was made without a volatile write cache, so no FLUSH would reach members that have one; delete it and add the array again")
	case o.Attrs&AttrReadOnly != 0 && d.Attrs&AttrReadOnly == 0:
		// A member that became read-only since (blockdev --setro, a
		// write-protected namespace): the device still takes writes,
		// every one of which would fail.
		return fmt.Errorf("it was made writable, and what it serves is read-only now; delete it and add it again")
	}
	return nil
}

// QueueCounter is implemented by targets that need to know how many
// queues serve them before the first NewQueue (a raid5/6 array gives
// each queue a ring of its write-hole log): SetQueueCount is called once
// per start, with the device's number of hardware queues.
type QueueCounter interface {
	SetQueueCount(n int) error
}
