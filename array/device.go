package array

import (
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Device is a member device as the array uses it outside the queue rings:
// superblock and bitmap writes, member flushes, the sync jobs' I/O, read
// repair, signature probes. *ublk.Member (a file or block device) is one;
// tests use in-memory devices with a volatile cache and fault injection
// (package array/memdev). Every method may be called from any goroutine;
// buffers given are aligned for O_DIRECT.
type Device interface {
	// Props are the device's properties (fixed while it is open).
	Props() *ublk.MemberProps
	// ReadAt reads len(p) bytes at byte offset off.
	ReadAt(p []byte, off int64) error
	// WriteAt writes p at off; the data may sit in a volatile cache
	// until Flush.
	WriteAt(p []byte, off int64) error
	// WriteAtDurable writes p at off and returns once it is durable
	// (a FUA write).
	WriteAtDurable(p []byte, off int64) error
	// Flush makes every write completed before it durable.
	Flush() error
	// Fd is the descriptor the queue rings use, or -1 when the device
	// has none (member I/O then goes through the queue's ring seam).
	Fd() int
	// Close releases the device.
	Close() error
}

// checkWritable refuses m when it is a read-only block device, asked
// again now (BLKROGET: `blockdev --setro`, or a namespace gone read-only
// since m was opened; otherwise what the open found). Linux opens such a
// device read-write and fails only its writes: a command must refuse it
// before it writes anything, not at its write after the others'.
func checkWritable(m *Member) error {
	ro := m.ReadOnly
	if m.BlockDevice && m.Device != nil && m.Fd() >= 0 {
		if v, err := unix.IoctlGetInt(m.Fd(), unix.BLKROGET); err == nil {
			ro = v != 0
		}
	}
	if ro {
		return fmt.Errorf("%s is read-only", m.Path)
	}
	return nil
}

// Member is an open member device with its properties.
type Member struct {
	ublk.MemberProps
	Device
	// lateWrites counts writes (discards, write-zeroes) to the member
	// given up after the member timeout that have not returned. While
	// one is out nothing is read from or written to the member (the
	// operations fail at once): the device may still carry the late
	// write out after a newer write to the same sectors, whose data it
	// would undo, or after a read, whose answer it would change with no
	// write in between (a resync reading it would copy the old data).
	// The member is kept in this state only when it holds the last
	// in-sync copy; were it failed, nothing would be sent anyway.
	lateWrites atomic.Int32
	// sbWriting: a superblock write is out on the member (writeSuperblocks,
	// under the array lock; one given up after the member timeout stays
	// out until the device answers). No other is sent meanwhile: the
	// device could carry out several given-up ones, each a generation
	// newer, and move the member generations ahead of the others.
	sbWriting atomic.Bool
	// logHeaderWriting: a write of the write-hole log's checkpoint is out
	// on the member (writeLogCheckpoint; one given up after the member
	// timeout stays out until the device answers). No other is sent
	// meanwhile: landing after a newer one, it would take the member's
	// checkpoint back, and the entries between the two, reused since,
	// would be replayed by a recovery that reads its header.
	logHeaderWriting atomic.Bool
	// undo: while a new array's creation may still be undone, what each
	// write replaces is saved there first (createundo.go).
	undo atomic.Pointer[undoLog]
	// sbPending is the last superblock written to the member when the
	// write's outcome is unknown (given up after the timeout, or taken
	// but not flushed): the member may hold that generation or the one
	// before. Under the array lock.
	sbPending *pendingSuperblock
	// key is its device's key for late I/O (late.go), taken when it was
	// opened (keyOK): operations given up on it still count on the device
	// once the member is closed (replaced while they were out).
	key   lateKey
	keyOK bool
	// out counts the member operations queues submitted to the device
	// through this Member that have not returned (given up ones included,
	// until they do), as md's nr_pending: remove refuses the device, and
	// replace keeps it open (closeWhenAnswered), while any is out, for a
	// write still out could land after the writes that follow. It stays
	// with the Member across a re-add in place. Each queue adds on its
	// own shard, a cache line of its own (the pad keeps the fields above,
	// which every queue reads, off the first), up to outShards queues.
	_   [64]byte
	out [outShards]struct {
		n atomic.Int32
		_ [60]byte
	}
	// jobOut counts the member operations sent to the device outside the
	// queues' rings through memberIO (the background jobs' and read
	// repair's) that have not returned, given up ones included, as out
	// does for the queues': a rebuild write not yet given up on a hung
	// device must keep remove refusing it (md counts sync I/O in
	// nr_pending) and a replaced device open. After out's shards: off the
	// fields every queue reads.
	jobOut atomic.Int32
}

// outShards is how many queues count on cache lines of their own.
const outShards = 16

// busy reports whether an operation submitted to m (by a queue or by
// memberIO) has not returned.
func (m *Member) busy() bool {
	return m != nil && (m.jobOut.Load() > 0 || m.ringBusy())
}

// ringBusy reports whether an operation a queue submitted to m has not
// returned.
func (m *Member) ringBusy() bool {
	if m == nil {
		return false
	}
	for i := range m.out {
		if m.out[i].n.Load() > 0 {
			return true
		}
	}
	return false
}

// pendingSuperblock is a superblock and its block, as written.
type pendingSuperblock struct {
	sb    engine.Superblock
	block []byte
}

// newMember wraps d.
func newMember(d Device) *Member {
	m := &Member{MemberProps: *d.Props(), Device: d}
	m.key, m.keyOK = deviceKey(m)
	return m
}

// OpenDevice opens a member device by path (CreateSpec.OpenDevice).
type OpenDevice func(path string) (Device, error)

// openFile opens path as a file or block device (ublk.OpenMember).
func openFile(path string) (Device, error) {
	m, err := ublk.OpenMember(path)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// openMember opens path with open (nil: openFile).
func openMember(open OpenDevice, path string) (*Member, error) {
	if open == nil {
		open = openFile
	}
	d, err := open(path)
	if err != nil {
		return nil, err
	}
	return newMember(d), nil
}

// alignedBuf is an n-byte buffer aligned for O_DIRECT (off the Go heap),
// and its release.
func alignedBuf(n int) ([]byte, func(), error) {
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("map a %d-byte buffer: %w", n, err)
	}
	return buf, func() { unix.Munmap(buf) }, nil
}

// ReadBlock reads n bytes at off (multiples of 4096), for metadata.
func (m *Member) ReadBlock(off int64, n int) ([]byte, error) {
	buf, free, err := alignedBuf(n)
	if err != nil {
		return nil, err
	}
	defer free()
	if err := m.ReadAt(buf, off); err != nil {
		return nil, err
	}
	return append([]byte(nil), buf...), nil
}

// WriteBlockSync writes data at off (multiples of 4096) and flushes the
// device before returning (the write and everything before it durable).
func (m *Member) WriteBlockSync(off int64, data []byte) error {
	buf, free, err := alignedBuf(len(data))
	if err != nil {
		return err
	}
	defer free()
	copy(buf, data)
	if err := m.WriteAt(buf, off); err != nil {
		return err
	}
	if err := m.Flush(); err != nil {
		return fmt.Errorf("%w: %w", errWrittenNotFlushed, err)
	}
	return nil
}

// errWrittenNotFlushed fails a WriteBlockSync whose write the device took
// and whose flush failed: the block may still become durable (a later
// flush, the device's own write-back).
var errWrittenNotFlushed = errors.New("written but not flushed")
