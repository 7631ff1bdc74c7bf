package ublk

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Member is a block device or regular file opened for O_DIRECT I/O by a
// target, with the properties the device parameters derive from.
type Member struct {
	MemberProps
	File *os.File
}

// MemberProps are a member device's properties: what the device
// parameters and the array's checks derive from.
type MemberProps struct {
	Path          string
	Size          int64 // bytes
	BlockDevice   bool
	LogicalBlock  int
	PhysicalBlock int
	IOMin         int
	IOOpt         int
	// VolatileCache is true when the member has a write-back cache (so a
	// FLUSH must reach it), and for regular files (whose data also depends
	// on the host filesystem's fdatasync).
	VolatileCache bool
	// Discard is true when DISCARD can be forwarded (punch hole for files,
	// BLOCK_URING_CMD_DISCARD for block devices that support discard).
	Discard bool
	// WriteZeroes is true when WRITE_ZEROES can be forwarded (fallocate
	// ZERO_RANGE: block devices always, as the kernel writes zeroes where
	// the device cannot; files when their filesystem supports it).
	WriteZeroes        bool
	DiscardGranularity int
	Rotational         bool
	// ReadOnly: the block device is read-only (BLKROGET: blockdev
	// --setro, a write-protected or worn-out NVMe namespace). It opens
	// read-write all the same; only its writes fail (EPERM).
	ReadOnly bool
}

// MinMemberBytes is the smallest member accepted.
const MinMemberBytes = 1 << 20

// OpenMember opens path O_RDWR|O_DIRECT. Block devices are opened O_EXCL,
// so a member that is mounted, in another array or otherwise held
// exclusively is refused (EBUSY) before anything is written to it; files
// are locked (flock LOCK_EX), so a file another array holds is refused
// (EBUSY) likewise.
func OpenMember(path string) (*Member, error) {
	st, block, err := statMember(path)
	if err != nil {
		return nil, err
	}
	m := &Member{MemberProps: MemberProps{Path: path, BlockDevice: block}}
	flags := unix.O_RDWR | unix.O_DIRECT | unix.O_CLOEXEC
	if block {
		flags |= unix.O_EXCL
	}
	fd, err := unix.Open(path, flags, 0)
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("member %s is in use (mounted, in an array, or opened exclusively by another program): %w", path, err)
		}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("member %s: %w (run as root)", path, err)
		}
		return nil, fmt.Errorf("open member %s: %w", path, err)
	}
	if !block {
		// A file has no O_EXCL: an exclusive lock of the open file
		// (flock: per open, so a second open in this process conflicts
		// too) refuses it to another array, here or in another process.
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("member %s is in use (locked by an array or another program): %w", path, unix.EBUSY)
			}
			return nil, fmt.Errorf("lock member %s: %w", path, err)
		}
	}
	m.File = os.NewFile(uintptr(fd), path)
	if err := m.probe(st); err != nil {
		m.File.Close()
		return nil, err
	}
	if m.Size < MinMemberBytes {
		m.File.Close()
		return nil, fmt.Errorf("member %s is too small: %d bytes, need at least %d", path, m.Size, MinMemberBytes)
	}
	return m, nil
}

// statMember stats the member at path, which must be a block device
// (block true) or a regular file: anything else (a character device, a
// directory) is refused with one line before it is opened.
// absentError is a member path that does not exist; it is
// os.ErrNotExist (errors.Is).
type absentError string

func (e absentError) Error() string { return "member " + string(e) + " does not exist" }

func (e absentError) Is(target error) bool { return target == os.ErrNotExist }

func statMember(path string) (st os.FileInfo, block bool, err error) {
	st, err = os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, absentError(path)
		}
		return nil, false, fmt.Errorf("member %s: %w", path, err)
	}
	switch {
	case st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0:
		return st, true, nil
	case st.Mode().IsRegular():
		return st, false, nil
	}
	return nil, false, fmt.Errorf("member %s is neither a block device nor a regular file", path)
}

// CurrentSize reads the member's size now (BLKGETSIZE64, or the file's
// size): Size is what it was when opened. Any goroutine.
func (m *Member) CurrentSize() (int64, error) {
	var n int64
	err := m.control(func(fd int) error {
		if !m.BlockDevice {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return err
			}
			n = st.Size
			return nil
		}
		var size uint64
		if err := ioctlPtr(fd, unix.BLKGETSIZE64, unsafe.Pointer(&size)); err != nil {
			return fmt.Errorf("member %s: BLKGETSIZE64: %w", m.Path, err)
		}
		n = int64(size)
		return nil
	})
	return n, err
}

func (m *Member) probe(st os.FileInfo) error {
	fd := int(m.File.Fd())
	if !m.BlockDevice {
		m.Size = st.Size()
		m.LogicalBlock, m.PhysicalBlock = 512, 4096
		var fs unix.Statfs_t
		if unix.Fstatfs(fd, &fs) == nil && fs.Bsize > 512 && fs.Bsize <= 4096 {
			m.PhysicalBlock = int(fs.Bsize)
		}
		// O_DIRECT on most filesystems wants the fs block size; be safe.
		m.LogicalBlock = m.PhysicalBlock
		m.VolatileCache = true
		m.Discard, m.WriteZeroes = fileSupports(fd, m.Size)
		m.DiscardGranularity = m.PhysicalBlock
		return nil
	}
	var size uint64
	if err := ioctlPtr(fd, unix.BLKGETSIZE64, unsafe.Pointer(&size)); err != nil {
		return fmt.Errorf("member %s: BLKGETSIZE64: %w", m.Path, err)
	}
	m.Size = int64(size)
	var v int32
	if err := ioctlPtr(fd, unix.BLKSSZGET, unsafe.Pointer(&v)); err != nil {
		return fmt.Errorf("member %s: BLKSSZGET: %w", m.Path, err)
	}
	m.LogicalBlock = int(v)
	var u uint32
	if ioctlPtr(fd, unix.BLKPBSZGET, unsafe.Pointer(&u)) == nil {
		m.PhysicalBlock = int(u)
	}
	if ioctlPtr(fd, unix.BLKIOMIN, unsafe.Pointer(&u)) == nil {
		m.IOMin = int(u)
	}
	if ioctlPtr(fd, unix.BLKIOOPT, unsafe.Pointer(&u)) == nil {
		m.IOOpt = int(u)
	}
	m.PhysicalBlock = max(m.PhysicalBlock, m.LogicalBlock)
	var ro int32
	if ioctlPtr(fd, unix.BLKROGET, unsafe.Pointer(&ro)) == nil {
		m.ReadOnly = ro != 0
	}
	var rdev unix.Stat_t
	if err := unix.Fstat(fd, &rdev); err != nil {
		return err
	}
	m.probeQueue(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(rdev.Rdev), unix.Minor(rdev.Rdev)))
	return nil
}

// probeQueue reads the queue properties of the block device whose sysfs
// directory is dev. A partition has no queue directory of its own: its
// disk's (dev/..) is the one that answers. A write cache that cannot be
// read is taken for a write-back one: advertising none would let the
// kernel drop every FLUSH and FUA.
func (m *Member) probeQueue(dev string) {
	q := dev + "/queue/"
	if _, err := os.Stat(dev + "/partition"); err == nil {
		q = dev + "/../queue/"
	}
	m.VolatileCache = strings.TrimSpace(readSys(q+"write_cache")) != "write through"
	m.WriteZeroes = true
	if n, _ := strconv.ParseInt(strings.TrimSpace(readSys(q+"discard_max_bytes")), 10, 64); n > 0 {
		m.Discard = true
		g, _ := strconv.Atoi(strings.TrimSpace(readSys(q + "discard_granularity")))
		m.DiscardGranularity = max(g, m.LogicalBlock)
	}
	m.Rotational = strings.TrimSpace(readSys(q+"rotational")) == "1"
}

// fileSupports probes whether the filesystem holding a member file of
// size bytes can punch holes (discard) and zero ranges (write-zeroes):
// tmpfs, for one, cannot zero ranges, and a member that answers
// EOPNOTSUPP must not have the request advertised. The probe is a 4 KiB
// fallocate past the end of the file, with KEEP_SIZE: the data and the
// size stay as they are (a filesystem may keep a block allocated past
// the end). A read-only descriptor (examine) probes nothing.
func fileSupports(fd int, size int64) (discard, zeroes bool) {
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE == unix.O_RDONLY {
		return false, false
	}
	off := (size + 4095) &^ 4095
	ok := func(mode uint32) bool {
		err := unix.Fallocate(fd, mode, off, 4096)
		return err == nil
	}
	zeroes = ok(unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE)
	discard = ok(unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE)
	return discard, zeroes
}

func readSys(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

// Close closes the member.
func (m *Member) Close() error { return m.File.Close() }

// Fd is the member's file descriptor.
func (m *Member) Fd() int { return int(m.File.Fd()) }

// log2 of a power of two.
func log2(n int) uint8 { return uint8(bits.Len(uint(n)) - 1) }

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// ReadBlock reads n bytes at off with O_DIRECT (off and n multiples of
// 4096), for metadata such as superblocks.
func (m *Member) ReadBlock(off int64, n int) ([]byte, error) {
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(buf)
	err = m.control(func(fd int) error {
		if got, err := unix.Pread(fd, buf, off); err != nil || got != n {
			if err == nil {
				err = ErrShortIO
			}
			return fmt.Errorf("read %s at %d: %w", m.Path, off, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), buf...), nil
}

// WriteBlockSync writes data at off with O_DIRECT (both multiples of 4096)
// and makes it durable (fdatasync) before returning.
func (m *Member) WriteBlockSync(off int64, data []byte) error {
	buf, err := unix.Mmap(-1, 0, len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	copy(buf, data)
	return m.control(func(fd int) error {
		if got, err := unix.Pwrite(fd, buf, off); err != nil || got != len(data) {
			if err == nil {
				err = ErrShortIO
			}
			return fmt.Errorf("write %s at %d: %w", m.Path, off, err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			return fmt.Errorf("fdatasync %s: %w", m.Path, err)
		}
		return nil
	})
}

// OpenMemberReadOnly opens path O_RDONLY|O_DIRECT without claiming it, for
// inspection (examine) of a member that may be in use.
func OpenMemberReadOnly(path string) (*Member, error) {
	st, block, err := statMember(path)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open member %s: %w", path, err)
	}
	m := &Member{MemberProps: MemberProps{Path: path, BlockDevice: block}, File: os.NewFile(uintptr(fd), path)}
	if err := m.probe(st); err != nil {
		m.File.Close()
		return nil, err
	}
	return m, nil
}

// WriteAtDurable writes data at off (both aligned for O_DIRECT; data not
// on the Go stack) and returns once it is durable: one RWF_DSYNC write (a
// FUA write where the device has a volatile cache, a plain write where it
// has none), or write and fdatasync where RWF_DSYNC is refused. For
// metadata such as the write-intent bitmap. Any goroutine.
// The descriptor is held for the call (see control): a write given up
// after the member timeout may still be running when the member closes.
func (m *Member) WriteAtDurable(data []byte, off int64) error {
	return m.control(func(fd int) error {
		n, err := unix.Pwritev2(fd, [][]byte{data}, off, unix.RWF_DSYNC)
		if err == unix.EOPNOTSUPP || err == unix.EINVAL {
			n, err = unix.Pwrite(fd, data, off)
			if err == nil && n == len(data) {
				err = unix.Fdatasync(fd)
			}
		}
		if err == nil && n != len(data) {
			err = ErrShortIO
		}
		if err != nil {
			return fmt.Errorf("write %s at %d: %w", m.Path, off, err)
		}
		return nil
	})
}
