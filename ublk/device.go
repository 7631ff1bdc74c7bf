package ublk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Config describes a device to create.
type Config struct {
	// ID is the wanted device number, or -1 for the first free one.
	ID int
	// Queues is the number of hardware queues; 0 means one per CPU, at
	// most MaxDefaultQueues.
	Queues int
	// Depth is the number of tags per queue; 0 means 128.
	Depth int
	// MaxIOBytes is the largest request, and the size of each tag's
	// buffer; 0 means 512 KiB.
	MaxIOBytes int
	// Params are the block device parameters. Basic.MaxSectors is filled
	// from MaxIOBytes when zero.
	Params Params
	// NoPin leaves queue threads unpinned: the same as CPUs = CPUsAny.
	NoPin bool
	// CPUs is where each queue thread may run (see QueueCPUs); "" is
	// DefaultCPUs.
	CPUs QueueCPUs
	// NoFixedBuffers skips registering the tag buffers with each ring.
	NoFixedBuffers bool
	// NoZeroCopy keeps the copy path where the driver offers zero copy
	// (UBLK_F_AUTO_BUF_REG, 6.16+) and the target supports it.
	NoZeroCopy bool
	// BatchIO serves the device with UBLK_F_BATCH_IO (Linux 7.0+): each
	// queue prepares its tags in one command, learns of requests from one
	// multishot fetch and commits all the requests a turn of its loop
	// completed in one command, instead of one command per request.
	// Create fails if the driver does not offer it. Recover follows the
	// device, whatever this says.
	BatchIO bool
	// DeferTaskrun creates queue rings with IORING_SETUP_DEFER_TASKRUN.
	DeferTaskrun bool
	// Scheduler, if set, is written to the block device's
	// queue/scheduler once it is live. "" leaves the kernel's choice,
	// which is mq-deadline for a device with one queue: for a device that
	// only remaps requests onto members with schedulers of their own that
	// is a lock and a sort per request and nothing gained, so servers pass
	// "none".
	Scheduler string
	// PollFor makes each queue thread poll for up to this long after
	// activity before sleeping in the kernel (0: never poll).
	PollFor time.Duration
}

// QueueCPUs says where queue threads run, relative to the CPUs the kernel
// maps to their queue (the CPUs whose submissions the queue serves).
type QueueCPUs string

const (
	// CPUsOwn pins each thread to the first CPU of its queue's set: the
	// submitter and the thread serving it share a CPU.
	CPUsOwn QueueCPUs = "own"
	// CPUsOthers lets each thread run on any CPU the process may use
	// except its queue's: serving a request never competes with its
	// submitter for a CPU (all of them when there are no others).
	CPUsOthers QueueCPUs = "others"
	// CPUsAny leaves threads unpinned: the scheduler places them.
	CPUsAny QueueCPUs = "any"
)

// DefaultCPUs is the default QueueCPUs. Measured in the project's VM (2
// vCPUs, raid1 on emulated NVMe, docs/bench/defaults.md), threads on the
// other CPUs served every job faster than threads on their queue's CPU:
// 1.9-2.2x at QD1, 1.2-1.6x elsewhere. A request then never waits for its
// own submitter to leave the CPU, and the member I/O is issued while the
// submitter carries on.
const DefaultCPUs = CPUsOthers

// ParseQueueCPUs parses a QueueCPUs name.
func ParseQueueCPUs(s string) (QueueCPUs, error) {
	if c := QueueCPUs(s); c.valid() {
		return c, nil
	}
	return "", fmt.Errorf("%q: want %s, %s or %s", s, CPUsOwn, CPUsOthers, CPUsAny)
}

func (c QueueCPUs) valid() bool { return c == CPUsOwn || c == CPUsOthers || c == CPUsAny }

// Defaults.
const (
	MaxDefaultQueues  = 8
	DefaultDepth      = 128
	DefaultMaxIOBytes = 512 << 10
)

// RecoveryWait is how long Recover retries START_USER_RECOVERY while the
// kernel reports the old server's files still open.
const RecoveryWait = 30 * time.Second

// Device is a ublk device served by this process.
type Device struct {
	ctrl     *Control
	info     DevInfo
	features uint64 // the driver's UBLK_F_* (GET_FEATURES)
	char     *os.File
	target   Target

	wg       sync.WaitGroup
	mu       sync.Mutex
	queueErr []error
	queues   []*Queue
	affinity []*unix.CPUSet // CPUs each queue thread may run on (nil: any); set before the queues start
	done     chan struct{}
	stopMu   sync.Mutex
	stopped  bool
	// stopFault: the kernel's answer to every stop, not asked (a test
	// seam: SetStopFault).
	stopFault unix.Errno
	// detach tells the queues to leave without STOP_DEV (Detach); live
	// are the running queues, to wake them for it.
	detach atomic.Bool
	live   []*Queue
	// failed: a serving queue ended on an error of its own (Failed).
	failed atomic.Bool
}

func (c *Config) normalize() {
	if c.Queues <= 0 {
		c.Queues = min(runtime.NumCPU(), MaxDefaultQueues)
	}
	if c.Depth <= 0 {
		c.Depth = DefaultDepth
	}
	if c.MaxIOBytes <= 0 {
		c.MaxIOBytes = DefaultMaxIOBytes
	}
}

// Normalized is c with its defaults filled in (queues, depth, max I/O
// size) as Create takes them.
func (c Config) Normalized() Config {
	c.normalize()
	return c
}

// ValidateQueues checks what Validate checks but the device parameters
// (the target's, known once its array is open): the number, queues,
// depth, CPUs, I/O size and scheduler. A caller about to write members
// for a device (an assembly's dirty mark) asks it first.
func (c Config) ValidateQueues() error {
	c.normalize()
	switch {
	case c.ID < -1 || c.ID >= 1<<20:
		return fmt.Errorf("device number %d out of range", c.ID)
	case c.Queues > maxNrQueues:
		return fmt.Errorf("%d queues: at most %d", c.Queues, maxNrQueues)
	case c.Depth > maxQueueDepth:
		return fmt.Errorf("queue depth %d: at most %d", c.Depth, maxQueueDepth)
	case c.CPUs != "" && !c.CPUs.valid():
		return fmt.Errorf("queue CPUs %q: want %s, %s or %s", c.CPUs, CPUsOwn, CPUsOthers, CPUsAny)
	case c.MaxIOBytes%4096 != 0 || c.MaxIOBytes > 32<<20:
		return fmt.Errorf("max I/O size %d: must be a multiple of 4096 up to 32 MiB", c.MaxIOBytes)
	}
	return CheckScheduler(c.Scheduler)
}

// Validate checks a configuration without touching the kernel.
func (c Config) Validate() error {
	if err := c.ValidateQueues(); err != nil {
		return err
	}
	c.normalize()
	if c.Params.Basic.DevSectors == 0 {
		return errors.New("device size is zero")
	}
	b := c.Params.Basic
	if b.LogicalBSShift < 9 || b.LogicalBSShift > 12 || b.PhysicalBSShift < b.LogicalBSShift {
		return fmt.Errorf("block size shifts logical %d physical %d invalid", b.LogicalBSShift, b.PhysicalBSShift)
	}
	return nil
}

// Create adds a ublk device served by target, starts its queues and makes
// /dev/ublkbN live. The device is created with USER_RECOVERY|REISSUE, so
// if this process dies, a new one can Recover it without I/O errors.
func Create(ctrl *Control, target Target, cfg Config) (*Device, error) {
	cfg.normalize()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	feats, err := ctrl.Features()
	if err != nil {
		return nil, err
	}
	if err := CheckFeatures(feats, cfg); err != nil {
		return nil, err
	}
	var batch uint64
	if cfg.BatchIO {
		batch = FlagBatchIO
	}
	id := ^uint32(0)
	if cfg.ID >= 0 {
		id = uint32(cfg.ID)
	}
	info, err := ctrl.AddDev(DevInfo{
		NrHwQueues:    uint16(cfg.Queues),
		QueueDepth:    uint16(cfg.Depth),
		MaxIOBufBytes: uint32(cfg.MaxIOBytes),
		DevID:         id,
		UblksrvPid:    int32(os.Getpid()),
		Flags:         flagsRequiredByThisDaemon | feats&flagsUsedWherePresent | feats&zeroCopyFlags(target, cfg) | batch,
	})
	if err != nil {
		return nil, err
	}
	d := &Device{ctrl: ctrl, info: info, features: feats, target: target, done: make(chan struct{})}
	fail := func(err error) (*Device, error) {
		d.teardown()
		if derr := ctrl.DelDev(info.DevID); derr != nil {
			err = fmt.Errorf("%w (and deleting the half-made device: %v)", err, derr)
		}
		return nil, err
	}
	p := cfg.Params
	p.Types |= ParamTypeBasic
	if p.Basic.MaxSectors == 0 || p.Basic.MaxSectors > info.MaxIOBufBytes>>9 {
		p.Basic.MaxSectors = info.MaxIOBufBytes >> 9
	}
	if err := ctrl.SetParams(info.DevID, p); err != nil {
		return fail(err)
	}
	if err := d.openChar(); err != nil {
		return fail(err)
	}
	if err := d.startQueues(cfg); err != nil {
		return fail(err)
	}
	if err := ctrl.StartDev(info.DevID, os.Getpid()); err != nil {
		return fail(err)
	}
	if info.Flags&FlagNoAutoPartScan != 0 {
		if err := scanPartitions(d.BlockPath()); err != nil {
			return fail(err)
		}
	}
	if cfg.Scheduler != "" {
		path := "/sys/block/" + filepath.Base(d.BlockPath()) + "/queue/scheduler"
		if err := os.WriteFile(path, []byte(cfg.Scheduler), 0); err != nil {
			return fail(fmt.Errorf("setting I/O scheduler %q: %w", cfg.Scheduler, err))
		}
	}
	return d, nil
}

// CheckFeatures reports why Create would refuse cfg on a driver offering
// feats (Control.Features), so that a caller about to write something
// for the device (a new array's superblocks) can refuse first.
func CheckFeatures(feats uint64, cfg Config) error {
	if need := flagsRequiredByThisDaemon; feats&need != need {
		return fmt.Errorf("ublk driver lacks features %#x (has %#x): need Linux 6.5+", need&^feats, feats)
	}
	if cfg.BatchIO && feats&FlagBatchIO == 0 {
		return ErrNoBatchIO
	}
	return nil
}

// ErrNoBatchIO is Create's answer to Config.BatchIO on a driver without
// UBLK_F_BATCH_IO.
var ErrNoBatchIO = errors.New("the ublk driver does not offer batched I/O commands (UBLK_F_BATCH_IO, Linux 7.0+)")

// zeroCopyFlags is what Create asks for zero copy: FlagAutoBufReg when
// the target can serve it (ZeroCopyTarget) and cfg does not refuse it.
func zeroCopyFlags(target Target, cfg Config) uint64 {
	if zc, ok := target.(ZeroCopyTarget); ok && zc.ZeroCopy() && !cfg.NoZeroCopy {
		return FlagAutoBufReg
	}
	return 0
}

// scanPartitions reads the partition table of a device created with
// UBLK_F_NO_AUTO_PART_SCAN (BLKRRPART), so that it is done, and its
// partitions exist, when Create returns. EBUSY (an exclusive opener came
// first, which has then seen the device as it is) is not an error.
func scanPartitions(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("partition scan: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetInt(fd, unix.BLKRRPART, 0); err != nil && err != unix.EBUSY {
		return fmt.Errorf("partition scan of %s (BLKRRPART): %w", path, err)
	}
	return nil
}

// CheckScheduler accepts "" and names made of what kernel elevator names
// are made of (so nothing else can be written into sysfs). Whether the
// kernel has that scheduler shows only when Create writes it.
func CheckScheduler(s string) error {
	ok := len(s) <= 32
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("I/O scheduler %q: want a name such as none or mq-deadline", s)
	}
	return nil
}

// CheckRecover reports why Recover would refuse to re-attach target to
// device id (no user recovery, live under another server, zero copy for a
// copy-only target, parameters the target cannot serve), changing
// nothing: a caller about to write its members (the dirty mark) asks
// first, so that a refused recovery leaves them as they were.
func CheckRecover(ctrl *Control, id uint32, target Target) error {
	_, err := checkRecover(ctrl, id, target)
	return err
}

// CheckRecoverDevice is the part of CheckRecover that needs no target and
// cannot change by waiting: whether device id exists as this server makes
// devices (user recovery with reissue, features it serves, bounds) and is
// not dead. A caller asks it before it assembles the array (which may
// write its members: a write-hole log replay, a blank spare's superblock),
// so that a recovery of a device that is not there changes nothing.
// Whether a live server still holds the device is left to CheckRecover:
// a server killed a moment ago still does, until the kernel releases it.
func CheckRecoverDevice(ctrl *Control, id uint32) error {
	_, err := checkRecoverDevice(ctrl, id)
	return err
}

// Served reports whether a live process serves the device: it is live
// and its server's pid exists (a dead server's device waits for recovery).
func (info DevInfo) Served() bool {
	return info.State == StateLive && info.UblksrvPid > 0 && unix.Kill(int(info.UblksrvPid), 0) == nil
}

func checkRecover(ctrl *Control, id uint32, target Target) (DevInfo, error) {
	info, err := checkRecoverDevice(ctrl, id)
	if err != nil {
		return DevInfo{}, err
	}
	if info.Served() {
		return DevInfo{}, fmt.Errorf("ublk device %d is live, served by pid %d", id, info.UblksrvPid)
	}
	if info.Flags&FlagAutoBufReg != 0 && zeroCopyFlags(target, Config{}) == 0 {
		// The kernel decides: a device made zero copy stays so, and only
		// a target that moves data with buffer slots can serve it.
		return DevInfo{}, fmt.Errorf("ublk device %d is zero copy (auto_buf_reg); this target has only the copy path", id)
	}
	if c, ok := target.(DeviceChecker); ok {
		p, err := ctrl.GetParams(id)
		if err != nil {
			return DevInfo{}, err
		}
		if err := c.CheckDevice(p); err != nil {
			return DevInfo{}, fmt.Errorf("ublk device %d: %w", id, err)
		}
		if pt, ok := target.(interface{ Params() Params }); ok && info.Flags&FlagAutoBufReg != 0 {
			// Zero copy: member I/O moves the users' pages with O_DIRECT,
			// which the members refuse (EINVAL, a failed member on a
			// write) unless the device makes users align them as the
			// members need. A device made before DMA_ALIGN was asked for
			// lets them be 4-byte aligned.
			own := pt.Params()
			if own.Types&ParamTypeDMAAlign != 0 && (p.Types&ParamTypeDMAAlign == 0 || p.DMA.Alignment < own.DMA.Alignment) {
				return DevInfo{}, fmt.Errorf("ublk device %d is zero copy and aligns user buffers to %d bytes; the members need %d", id, dmaAlignment(p), own.DMA.Alignment+1)
			}
		}
	}
	return info, nil
}

// checkRecoverDevice: CheckRecoverDevice, returning the device's info.
func checkRecoverDevice(ctrl *Control, id uint32) (DevInfo, error) {
	info, err := ctrl.DevInfo(id)
	if err != nil {
		return DevInfo{}, err
	}
	if err := CheckRecoverInfo(id, info); err != nil {
		return DevInfo{}, err
	}
	return info, nil
}

// CheckRecoverInfo is CheckRecoverDevice of device id whose info the
// caller has already asked.
func CheckRecoverInfo(id uint32, info DevInfo) error {
	if info.Flags&FlagUserRecovery == 0 {
		return fmt.Errorf("ublk device %d was not created with user recovery", id)
	}
	if info.Flags&FlagUserRecoveryReissue == 0 {
		// Made by another server: the kernel fails a request in flight
		// when its server leaves, so this server's hand-overs (a restart
		// keeping the device, a grow, a failed queue) would fail its
		// users' I/O. Create makes devices with REISSUE only.
		return fmt.Errorf("ublk device %d was created without user_recovery_reissue: its I/O in flight would fail at every hand-over", id)
	}
	if info.State == StateDead {
		// Stopped, not deleted (a server killed between STOP_DEV and
		// DEL_DEV, or before START_DEV): START_USER_RECOVERY refuses it
		// for good.
		return fmt.Errorf("ublk device %d is stopped (dead): nothing to re-attach to; delete it", id)
	}
	if other := info.Flags &^ flagsRecoverable; other != 0 {
		// Made by another server, or a later version: a queue protocol
		// this one does not speak (user copy, GET_DATA, other
		// descriptor sizes...) would be served wrongly.
		return fmt.Errorf("ublk device %d has features this server does not serve: %v", id, FlagNames(other))
	}
	if info.NrHwQueues == 0 || int(info.NrHwQueues) > maxNrQueues || info.QueueDepth == 0 || int(info.QueueDepth) > maxQueueDepth ||
		info.MaxIOBufBytes == 0 || info.MaxIOBufBytes%4096 != 0 || info.MaxIOBufBytes > 32<<20 {
		// The queues are set up from these: bounded as Config.Validate
		// bounds a new device's.
		return fmt.Errorf("ublk device %d has %d queues of depth %d and %d-byte I/O buffers: beyond what this server serves (%d queues, depth %d, 32 MiB)",
			id, info.NrHwQueues, info.QueueDepth, info.MaxIOBufBytes, maxNrQueues, maxQueueDepth)
	}
	if info.Flags&FlagIODescSize != 0 && info.Pad0 != ioDescSize {
		return fmt.Errorf("ublk device %d has %d-byte I/O descriptors; this server reads %d-byte ones", id, info.Pad0, ioDescSize)
	}
	return nil
}

// dmaAlignment is the user buffer alignment device parameters p ask for
// (the driver's default without DMA_ALIGN: 4 bytes).
func dmaAlignment(p Params) uint32 {
	if p.Types&ParamTypeDMAAlign == 0 {
		return 4
	}
	return p.DMA.Alignment + 1
}

// Recover re-attaches this process to device id, whose previous server
// died: START_USER_RECOVERY (retried while the kernel is still releasing
// the old server), queues that FETCH every tag, END_USER_RECOVERY. Requests
// the old server had not completed are reissued to the new queues.
func Recover(ctrl *Control, id uint32, target Target, cfg Config) (*Device, error) {
	info, err := checkRecover(ctrl, id, target)
	if err != nil {
		return nil, err
	}
	feats, err := ctrl.Features()
	if err != nil {
		return nil, err
	}
	if err := ctrl.StartUserRecovery(id, RecoveryWait); err != nil {
		return nil, err
	}
	// From here on a failure ends the recovery begun (abandonRecovery):
	// left half begun, 6.12 refuses every later START_USER_RECOVERY and
	// the device's users wait for good.
	d := &Device{ctrl: ctrl, info: info, features: feats, target: target, done: make(chan struct{})}
	if err := d.openChar(); err != nil {
		close(d.done) // no queue started
		d.abandonRecovery()
		return nil, err
	}
	if err := d.startQueues(cfg); err != nil {
		d.abandonRecovery()
		return nil, err
	}
	if err := ctrl.EndUserRecovery(id, os.Getpid()); err != nil {
		d.abandonRecovery()
		return nil, err
	}
	return d, nil
}

// abandonRecovery ends a recovery that failed. Where the driver lets a
// recovery start again (7.x does), the device is let go rather than
// stopped: it stays quiesced, its users' requests waiting (a filesystem
// may be mounted on it), for another Recover; stopping it would fail
// them. Where it does not (6.12 refuses a second START_USER_RECOVERY
// until the first one's queues are ready), a device left so would hang
// its users for good: it is stopped, as before.
func (d *Device) abandonRecovery() {
	d.letGo()
	if err := d.ctrl.StartUserRecovery(d.info.DevID, RecoveryWait); err != nil {
		d.ctrl.StopDev(d.info.DevID)
	}
}

// letGo ends the queues (as Detach says) and releases the character
// device, leaving the device as a dead server leaves it: Detach, and a
// failed Recover.
func (d *Device) letGo() {
	d.detach.Store(true)
	d.mu.Lock()
	for _, q := range d.live {
		q.Wake()
	}
	d.mu.Unlock()
	<-d.done
	d.closeChar()
}

// closeChar releases the character device (once: a failed queue's
// hand-over, Detach and Stop may each get here).
func (d *Device) closeChar() {
	d.mu.Lock()
	c := d.char
	d.char = nil
	d.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Failed reports that a queue ended on an error of its own while serving
// (a ring that failed, a protocol error). A queue that fails alone would
// leave the device hanging every request mapped to it (and, the driver
// quiescing the whole disk when its commands are cancelled, every other
// one) while the character device stays open: instead every queue then
// leaves as for Detach and the character device is released, so the
// device waits, with its users' requests, for a recovery (Recover) as
// after a crash of the server. Done closes with Failed already set; the
// queues' errors are Err.
func (d *Device) Failed() bool { return d.failed.Load() }

func (d *Device) openChar() error {
	path := d.CharPath()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err == nil {
			d.char = f
			return nil
		}
		// The node appears asynchronously (devtmpfs/udev).
		if !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			return fmt.Errorf("open %s: %w", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *Device) startQueues(cfg Config) error {
	n := int(d.info.NrHwQueues)
	if qc, ok := d.target.(QueueCounter); ok {
		if err := qc.SetQueueCount(n); err != nil {
			close(d.done) // no queue started
			return err
		}
	}
	d.queueErr = make([]error, n)
	d.queues = make([]*Queue, n)
	d.affinity = make([]*unix.CPUSet, n)
	readies := make([]chan error, n)
	policy := cfg.CPUs
	if policy == "" {
		policy = DefaultCPUs
	}
	if cfg.NoPin {
		policy = CPUsAny
	}
	for i := range n {
		var affinity *unix.CPUSet
		if policy != CPUsAny {
			if set, err := d.ctrl.QueueAffinity(d.info.DevID, uint16(i)); err == nil {
				affinity = queueAffinity(policy, &set)
			}
		}
		d.affinity[i] = affinity
		readies[i] = make(chan error, 1)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			q, err := runQueue(queueSetup{
				id: i, depth: int(d.info.QueueDepth), maxIO: int(d.info.MaxIOBufBytes),
				char: d.char, target: d.target, affinity: affinity, fixedBuffers: !cfg.NoFixedBuffers,
				zeroCopy:     d.info.Flags&FlagAutoBufReg != 0,
				batchIO:      d.info.Flags&FlagBatchIO != 0,
				deferTaskrun: cfg.DeferTaskrun, pollFor: cfg.PollFor, detach: &d.detach,
				started: func(q *Queue) { d.mu.Lock(); d.live = append(d.live, q); d.mu.Unlock() },
			}, readies[i])
			d.mu.Lock()
			d.queueErr[i] = err
			d.queues[i] = q
			d.mu.Unlock()
			if err != nil && q != nil && q.served && !d.detach.Load() {
				// Set before this queue counts as ended: Done closes
				// with Failed already true.
				d.failed.Store(true)
				go d.letGo()
			}
		}()
	}
	go func() { d.wg.Wait(); close(d.done) }()
	var errs []error
	for _, r := range readies {
		if err := <-r; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// queueAffinity is the CPU set a queue thread runs on under policy, for a
// queue the kernel maps the CPUs of set to; nil: anywhere.
func queueAffinity(policy QueueCPUs, set *unix.CPUSet) *unix.CPUSet {
	var out unix.CPUSet
	switch policy {
	case CPUsOthers:
		if err := unix.SchedGetaffinity(0, &out); err != nil {
			return nil
		}
		for c := range len(set) * 64 {
			if set.IsSet(c) {
				out.Clear(c)
			}
		}
		if out.Count() == 0 {
			return nil // one CPU: nowhere else to go
		}
	default:
		// The first of the queue's CPUs this process may run on: the
		// kernel's map covers every possible CPU, including ones offline
		// or outside the daemon's cpuset, where pinning fails (and with
		// it the queue's setup).
		var allowed unix.CPUSet
		if err := unix.SchedGetaffinity(0, &allowed); err != nil {
			return nil
		}
		for i := range allowed {
			allowed[i] &= set[i]
		}
		c := firstCPU(&allowed)
		if c < 0 {
			return nil // none of them: unpinned
		}
		out.Set(c)
	}
	return &out
}

func firstCPU(set *unix.CPUSet) int {
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			return c
		}
	}
	return -1
}

// teardown stops the queues (STOP_DEV aborts every FETCH; queues then
// exit) and releases the character device. Where STOP_DEV fails, the
// queues are made to leave (letGo): the device is being given up.
func (d *Device) teardown() {
	d.mu.Lock()
	open := d.char != nil // (a failed queue's hand-over may close it: closeChar)
	d.mu.Unlock()
	if !open {
		return
	}
	if err := d.ctrl.StopDev(d.info.DevID); err != nil && !errors.Is(err, unix.ENODEV) {
		// Refused: no FETCH was aborted, and waiting for the queues
		// would hang. They leave by themselves instead (closing their
		// rings cancels their commands), as for Detach.
		d.letGo()
		return
	}
	<-d.done
	d.closeChar()
}

// ID is the device number N of /dev/ublkbN.
func (d *Device) ID() uint32 { return d.info.DevID }

// Info is the device info as of creation or recovery; Info().Flags are
// the UBLK_F_* the device was created with.
func (d *Device) Info() DevInfo { return d.info }

// DriverFeatures is the driver's UBLK_F_* mask (UBLK_U_CMD_GET_FEATURES):
// what it offers, of which the device uses Info().Flags.
func (d *Device) DriverFeatures() uint64 { return d.features }

// BlockPath is /dev/ublkbN.
func (d *Device) BlockPath() string { return fmt.Sprintf("/dev/ublkb%d", d.info.DevID) }

// CharPath is /dev/ublkcN.
func (d *Device) CharPath() string { return fmt.Sprintf("/dev/ublkc%d", d.info.DevID) }

// Done is closed when every queue has stopped.
func (d *Device) Done() <-chan struct{} { return d.done }

// Err returns the queues' errors once Done is closed.
func (d *Device) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.queueErr...)
}

// Stop removes the block device (waiting for in-flight I/O), stops the
// queues and releases the character device. The device still exists
// (stopped) until Delete. Where the kernel refuses STOP_DEV (or gives no
// answer in Control.Timeout), Stop returns at once an error that wraps
// ErrNotStopped: the device goes on serving, and a later Stop may try
// again. A device already gone (ENODEV: deleted, or its block device
// already removed) had its commands aborted: Stop then ends as for a
// stop, returning that error.
func (d *Device) Stop() error { return d.stop(false) }

// ErrNotStopped is wrapped by Stop's, StopUnused's and Delete's error
// when the kernel did not stop the device: it is still served by this
// process, as before the call.
var ErrNotStopped = errors.New("the device was not stopped and is still served")

// ErrInUse is StopUnused's refusal: the block device is open.
var ErrInUse = errors.New("the block device is open")

// ErrNoSafeStop is StopUnused's answer on a driver without
// UBLK_F_SAFE_STOP_DEV (before 7.0): the caller checks for users itself,
// and calls Stop.
var ErrNoSafeStop = errors.New("the ublk driver cannot stop a device only while unused (UBLK_F_SAFE_STOP_DEV, Linux 7.0+)")

// StopUnused is Stop done by the kernel only if nothing has the block
// device open (UBLK_U_CMD_TRY_STOP_DEV): no check-then-stop race with a
// mount or an opener. An opener makes it fail with ErrInUse, after
// retrying for about a second (an opener such as udev's probe is brief),
// and leaves the device serving; any other refusal as Stop's
// (ErrNotStopped).
func (d *Device) StopUnused() error {
	if d.info.Flags&FlagSafeStopDev == 0 {
		return ErrNoSafeStop
	}
	return d.stop(true)
}

func (d *Device) stop(unused bool) error {
	d.stopMu.Lock()
	defer d.stopMu.Unlock()
	if d.stopped {
		return nil
	}
	var err error
	switch {
	case d.stopFault != 0:
		err = &CommandError{Cmd: "STOP_DEV", DevID: d.info.DevID, Errno: d.stopFault}
	case unused:
		if err = d.ctrl.StopUnusedDev(d.info.DevID); errors.Is(err, ErrInUse) {
			return err
		}
	default:
		err = d.ctrl.StopDev(d.info.DevID)
	}
	// Only ENODEV says the device is gone (its disk removed, or the
	// device deleted: either aborted every FETCH). Any other failure is
	// the control path's (EPERM, EINVAL, EOPNOTSUPP, no answer): the
	// driver's stop itself cannot fail, so it did not run, the queues'
	// commands stay in the kernel, and waiting for them would hang.
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("%w: %w", err, ErrNotStopped)
	}
	d.stopped = true
	<-d.done
	d.closeChar()
	if qerr := d.Err(); qerr != nil && err == nil {
		err = qerr
	}
	return err
}

// SetStopFault makes every stop of the device (Stop, StopUnused, Delete)
// fail as if the kernel had answered STOP_DEV with errno, without asking
// it (0: ask it again): a fault-injection seam for the tests of the
// layers above, as Queue.SetEnterFault.
func (d *Device) SetStopFault(errno unix.Errno) {
	d.stopMu.Lock()
	d.stopFault = errno
	d.stopMu.Unlock()
}

// ErrNoUpdateSize is UpdateSize's answer for a device created without
// UBLK_F_UPDATE_SIZE (a driver before 6.16 does not offer it).
var ErrNoUpdateSize = errors.New("the ublk driver cannot resize a live device (UBLK_F_UPDATE_SIZE, Linux 6.16+)")

// CanUpdateSize reports whether the device was created with
// UBLK_F_UPDATE_SIZE.
func (d *Device) CanUpdateSize() bool { return d.info.Flags&FlagUpdateSize != 0 }

// UpdateSize sets the block device's size (UBLK_U_CMD_UPDATE_SIZE);
// ErrNoUpdateSize where the device lacks UBLK_F_UPDATE_SIZE. The target
// must serve every sector below the new size before it is called.
func (d *Device) UpdateSize(sectors uint64) error {
	if !d.CanUpdateSize() {
		return ErrNoUpdateSize
	}
	return d.ctrl.UpdateSize(d.info.DevID, sectors)
}

// Detach makes this process let go of the device without stopping it, as
// if the server had died: the queues leave their loops and close their
// rings (the kernel cancels their commands and quiesces the device, whose
// pending and new requests wait), and the character device is released.
// The block device stays, usable by Recover with a new target; requests
// the queues had not completed are reissued to it. Each queue first stops
// handing new requests to the target and reaps the member I/O it has in
// flight (so none lands after the next target took over), for at most
// detachDrain: a hung member's I/O is then left to the ring's teardown.
// The target is closed (QueueHandler.Close) after that. It returns once the driver says the device is
// no longer live (quiesced), or an error after wait.
func (d *Device) Detach(wait time.Duration) error {
	d.stopMu.Lock()
	defer d.stopMu.Unlock()
	if d.stopped {
		return errors.New("the device is stopped")
	}
	d.stopped = true
	d.letGo()
	deadline := time.Now().Add(wait)
	for {
		info, err := d.ctrl.DevInfo(d.info.DevID)
		if err != nil {
			return err
		}
		if info.State != StateLive {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ublk device %d still live %v after its queues left", d.info.DevID, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Delete stops the device if needed and deletes it. A stop refused
// (ErrNotStopped) is returned as it is: the device is not deleted.
func (d *Device) Delete() error {
	serr := d.Stop()
	if errors.Is(serr, ErrNotStopped) {
		return serr
	}
	if err := d.ctrl.DelDev(d.info.DevID); err != nil {
		return errors.Join(serr, err)
	}
	return serr
}
