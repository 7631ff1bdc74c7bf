package ublk

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ControlPath is the ublk driver's control device.
const ControlPath = "/dev/ublk-control"

// ErrNoDriver means the ublk driver is not loaded.
var ErrNoDriver = errors.New(ControlPath + " does not exist: load the driver with `modprobe ublk_drv` (Linux 6.0+ with CONFIG_BLK_DEV_UBLK)")

// ErrNotRoot means the control device refused us for lack of privilege.
var ErrNotRoot = errors.New("permission denied on " + ControlPath + ": ublk devices are created by root (CAP_SYS_ADMIN)")

// DefaultControlTimeout bounds every control command wait, so a wedged
// kernel or server yields an error instead of a hang.
const DefaultControlTimeout = 30 * time.Second

// Control sends commands to /dev/ublk-control. It is safe for concurrent
// use: each command takes a ring from a small pool, so a command that
// blocks in the kernel (START_DEV waits for every queue to FETCH) does not
// hold up others.
type Control struct {
	f       *os.File
	mu      sync.Mutex
	free    []*ctrlRing
	Timeout time.Duration
}

// ctrlRing is an SQE128 ring with a page of anonymous memory that
// carries command buffers. Buffers live outside the Go heap so that a
// command abandoned on timeout can still be written by the kernel later
// without corrupting anything: such a ring is never reused or unmapped.
type ctrlRing struct {
	r   *Ring
	buf []byte
	seq uint64
}

// OpenControl opens the control device.
func OpenControl() (*Control, error) {
	f, err := os.OpenFile(ControlPath, os.O_RDWR, 0)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, ErrNoDriver
		case errors.Is(err, os.ErrPermission):
			return nil, ErrNotRoot
		}
		return nil, fmt.Errorf("open %s: %w", ControlPath, err)
	}
	return &Control{f: f, Timeout: DefaultControlTimeout}, nil
}

// Close releases the control device and its idle rings.
func (c *Control) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cr := range c.free {
		cr.r.Close()
		unix.Munmap(cr.buf)
	}
	c.free = nil
	return c.f.Close()
}

func (c *Control) getRing() (*ctrlRing, error) {
	c.mu.Lock()
	if n := len(c.free); n > 0 {
		cr := c.free[n-1]
		c.free = c.free[:n-1]
		c.mu.Unlock()
		return cr, nil
	}
	c.mu.Unlock()
	r, err := NewRing(4, RingOptions{SQE128: true})
	if err != nil {
		return nil, err
	}
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("mmap control buffer: %w", err)
	}
	return &ctrlRing{r: r, buf: buf}, nil
}

func (c *Control) putRing(cr *ctrlRing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.free) < 4 {
		c.free = append(c.free, cr)
		return
	}
	cr.r.Close()
	unix.Munmap(cr.buf)
}

// CommandError is a control command the kernel failed.
type CommandError struct {
	Cmd   string
	DevID uint32
	Errno unix.Errno
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("ublk %s (dev %d): %v", e.Cmd, int32(e.DevID), e.Errno)
}

func (e *CommandError) Unwrap() error { return e.Errno }

// ctrlCmd describes one control command.
type ctrlCmd struct {
	name    string
	op      uint32
	devID   uint32
	queueID uint16
	in      []byte // copied into the command buffer before submission
	outLen  int    // bytes of command buffer passed to the kernel (>= len(in))
	data0   uint64
	timeout time.Duration
}

// do runs one control command and returns the command buffer's contents
// after completion (outLen bytes).
func (c *Control) do(cmd ctrlCmd) ([]byte, error) {
	cr, err := c.getRing()
	if err != nil {
		return nil, err
	}
	bufLen := max(cmd.outLen, len(cmd.in))
	copy(cr.buf, cmd.in)
	clear(cr.buf[len(cmd.in):bufLen])
	cr.seq++
	s := cr.r.GetSQE()
	s.Opcode = OpURingCmd
	s.Fd = int32(c.f.Fd())
	s.Off = uint64(cmd.op)
	s.UserData = cr.seq
	h := (*ublksrvCtrlCmd)(s.cmdArea())
	h.DevID = cmd.devID
	h.QueueID = cmd.queueID
	h.Data[0] = cmd.data0
	if bufLen > 0 {
		h.Addr = uint64(uintptr(unsafe.Pointer(&cr.buf[0])))
		h.Len = uint16(bufLen)
	}
	timeout := cmd.timeout
	if timeout == 0 {
		timeout = c.Timeout
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := cr.r.WaitTimeout(time.Until(deadline)); err != nil {
			// The command may still be in flight: abandon the ring, never to
			// reuse it; the kernel may yet write into cr.buf, which
			// therefore stays mapped.
			cr.r.Close()
			if err == unix.ETIME {
				return nil, fmt.Errorf("ublk %s (dev %d): no answer from the kernel in %v", cmd.name, int32(cmd.devID), timeout)
			}
			return nil, fmt.Errorf("ublk %s: %w", cmd.name, err)
		}
		cqe := cr.r.PeekCQE()
		ud, res := cqe.UserData, cqe.Res
		cr.r.SeenCQE()
		if ud != cr.seq {
			continue // a stale completion; cannot happen on a ring never abandoned
		}
		out := append([]byte(nil), cr.buf[:bufLen]...)
		c.putRing(cr)
		if res < 0 {
			return out, &CommandError{Cmd: cmd.name, DevID: cmd.devID, Errno: unix.Errno(-res)}
		}
		return out, nil
	}
}

func asBytes[T any](v *T) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v)) }

func fromBytes[T any](b []byte) T {
	var v T
	copy(asBytes(&v), b)
	return v
}

const noQueue = 0xffff

// Features returns the driver's UBLK_F_* feature mask.
func (c *Control) Features() (uint64, error) {
	out, err := c.do(ctrlCmd{name: "GET_FEATURES", op: cmdGetFeatures, devID: ^uint32(0), queueID: noQueue, outLen: 8})
	if err != nil {
		return 0, err
	}
	return fromBytes[uint64](out), nil
}

// AddDev creates a device. info.DevID is the wanted id, or ^0 for any; the
// kernel's view of the new device (id, clamped queue count, aligned
// buffer size) is returned.
func (c *Control) AddDev(info DevInfo) (DevInfo, error) {
	out, err := c.do(ctrlCmd{name: "ADD_DEV", op: cmdAddDev, devID: info.DevID, queueID: noQueue, in: asBytes(&info)})
	if err != nil {
		return DevInfo{}, err
	}
	return fromBytes[DevInfo](out), nil
}

// DelDev removes a stopped device; it waits until the device's character
// device is released by every process.
func (c *Control) DelDev(id uint32) error {
	_, err := c.do(ctrlCmd{name: "DEL_DEV", op: cmdDelDev, devID: id, queueID: noQueue})
	return err
}

// StartDev makes the block device live. It returns once every tag of every
// queue has a FETCH in flight and the disk is added (older drivers scan
// partitions through the queues meanwhile; newer ones from a work item
// after it returns, see FlagNoAutoPartScan), so it must not be called from
// a queue thread.
func (c *Control) StartDev(id uint32, pid int) error {
	for {
		_, err := c.do(ctrlCmd{name: "START_DEV", op: cmdStartDev, devID: id, queueID: noQueue, data0: uint64(pid)})
		if errors.Is(err, unix.EINTR) {
			continue // the kernel's wait was interrupted by a signal; it can be waited again
		}
		return err
	}
}

// StopDev removes the block device; FETCHes still in flight complete with
// UBLK_IO_RES_ABORT.
func (c *Control) StopDev(id uint32) error {
	_, err := c.do(ctrlCmd{name: "STOP_DEV", op: cmdStopDev, devID: id, queueID: noQueue})
	return err
}

// TryStopDev is StopDev only if the block device has no opener; EBUSY
// otherwise. Needs UBLK_F_SAFE_STOP_DEV on the device (Linux 7.0+).
func (c *Control) TryStopDev(id uint32) error {
	_, err := c.do(ctrlCmd{name: "TRY_STOP_DEV", op: cmdTryStopDev, devID: id, queueID: noQueue})
	return err
}

// StopUnusedDev is TryStopDev retried for about a second while the device
// is open (an opener such as udev's probe is brief); then ErrInUse.
func (c *Control) StopUnusedDev(id uint32) error {
	for i := 0; ; i++ {
		err := c.TryStopDev(id)
		if !errors.Is(err, unix.EBUSY) {
			return err
		}
		if i == 10 {
			return fmt.Errorf("/dev/ublkb%d: %w", id, ErrInUse)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// UpdateSize sets the block device's size to sectors (512-byte) while it
// is live (UBLK_U_CMD_UPDATE_SIZE; the device needs UBLK_F_UPDATE_SIZE,
// Linux 6.16+). The kernel changes the capacity and notifies (a uevent);
// requests already queued are not checked again.
func (c *Control) UpdateSize(id uint32, sectors uint64) error {
	_, err := c.do(ctrlCmd{name: "UPDATE_SIZE", op: cmdUpdateSize, devID: id, queueID: noQueue, data0: sectors})
	return err
}

// SetParams sets the device parameters; only before START_DEV.
func (c *Control) SetParams(id uint32, p Params) error {
	p.Len = uint32(unsafe.Sizeof(p))
	p.Types &^= ParamTypeDevt
	_, err := c.do(ctrlCmd{name: "SET_PARAMS", op: cmdSetParams, devID: id, queueID: noQueue, in: asBytes(&p)})
	return err
}

// GetParams returns the device parameters, including devt.
func (c *Control) GetParams(id uint32) (Params, error) {
	p := Params{Len: uint32(unsafe.Sizeof(Params{}))}
	out, err := c.do(ctrlCmd{name: "GET_PARAMS", op: cmdGetParams, devID: id, queueID: noQueue, in: asBytes(&p)})
	if err != nil {
		return Params{}, err
	}
	return fromBytes[Params](out), nil
}

// DevInfo returns the device's info (state, server pid, queues).
func (c *Control) DevInfo(id uint32) (DevInfo, error) {
	out, err := c.do(ctrlCmd{name: "GET_DEV_INFO", op: cmdGetDevInfo, devID: id, queueID: noQueue, outLen: int(unsafe.Sizeof(DevInfo{}))})
	if err != nil {
		return DevInfo{}, err
	}
	return fromBytes[DevInfo](out), nil
}

// Exists reports whether device id exists (served or not); an error only
// if the driver could not be asked.
func (c *Control) Exists(id uint32) (bool, error) {
	_, err := c.DevInfo(id)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENODEV):
		return false, nil
	}
	return false, err
}

// QueueAffinity returns the CPUs the kernel maps to queue q.
func (c *Control) QueueAffinity(id uint32, q uint16) (unix.CPUSet, error) {
	var set unix.CPUSet
	out, err := c.do(ctrlCmd{name: "GET_QUEUE_AFFINITY", op: cmdGetQueueAffinity, devID: id, queueID: q,
		outLen: int(unsafe.Sizeof(set)), data0: uint64(q)}) // the kernel reads the queue from data[0]
	if err != nil {
		return set, err
	}
	copy(asBytes(&set), out)
	return set, nil
}

// StartUserRecovery prepares a quiesced device whose server died for a new
// server. The kernel answers EBUSY until the old server's files are
// released and the device is quiesced; this retries for up to wait.
func (c *Control) StartUserRecovery(id uint32, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		_, err := c.do(ctrlCmd{name: "START_USER_RECOVERY", op: cmdStartUserRecovery, devID: id, queueID: noQueue})
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// EndUserRecovery makes a recovered device live again once every queue of
// the new server has FETCHed all its tags.
func (c *Control) EndUserRecovery(id uint32, pid int) error {
	for {
		_, err := c.do(ctrlCmd{name: "END_USER_RECOVERY", op: cmdEndUserRecovery, devID: id, queueID: noQueue, data0: uint64(pid)})
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err
	}
}
