package array

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/resync"
)

// barrierShift: sync barrier buckets of 2 MiB (a sync step is at most
// 1 MiB, so it raises one or two buckets).
const barrierShift = 12

// checkpointEvery is how often a rebuild's durable position is recorded in
// the superblocks.
const checkpointEvery = 5 * time.Second

// SyncStatus describes the background job (for detail and metrics).
type SyncStatus struct {
	Action string `json:"action"` // rebuild, resync, check, repair, or idle
	// Done and Total are bytes: of the rebuilt member's data area for a
	// rebuild, of the array otherwise.
	Done       uint64  `json:"done_bytes"`
	Total      uint64  `json:"total_bytes"`
	SpeedBytes float64 `json:"speed_bytes_per_second"`
	ETASeconds float64 `json:"eta_seconds,omitempty"`
	Targets    []int   `json:"targets,omitempty"`
	LastAction string  `json:"last_action,omitempty"`
	LastResult string  `json:"last_result,omitempty"` // "ok" or the error
	// MismatchCnt is md's mismatch_cnt: the 512-byte sectors the running
	// or last check or repair found differing (counted by 4 KiB block: a
	// multiple of 8, as md's raid5 counts by page); a check or repair
	// starts it at 0 and counts up as it goes.
	MismatchCnt uint64 `json:"mismatch_cnt"`
	// LastCheck and LastCheckResult are the last check or repair and how
	// it ended, kept when other jobs follow it (md's mismatch_cnt stays
	// too): a resync of regions first written during a check, for one.
	LastCheck       string `json:"last_check,omitempty"`
	LastCheckResult string `json:"last_check_result,omitempty"`
	ResyncNeeded    bool   `json:"resync_needed,omitempty"`
	// Settling: a job has just ended and the array is choosing what runs
	// next (a pending resync, a spare), or a resync is about to start
	// for ranges writes left unsynced or first wrote: Action says idle,
	// but a job may start at once. `detail --wait` waits through it.
	Settling bool `json:"settling,omitempty"`
}

// syncer runs the array's background jobs, one at a time.
type syncer struct {
	a        *Array
	s        *resync.Syncer
	mu       sync.Mutex
	running  bool
	kind     resync.Kind
	targets  []int
	started  time.Time
	startPos uint64
	cancel   context.CancelFunc
	done     chan struct{}
	last     resync.Kind
	lastRes  string
	lastHad  bool
	mism     uint64
	// runsAt is the Syncer's Runs before the running job's Run.
	runsAt uint64
	// rebuildFailed: a rebuild failed, at the DropGen rebuildFailedGen.
	rebuildFailed    bool
	rebuildFailedGen uint64
	// lastCheck, lastCheckRes: the last check or repair ("": none).
	lastCheck, lastCheckRes string
	// stopped: StopSync was called (the array is stopping); no job
	// starts any more.
	stopped bool
	// settling: a job ended and nextJob has not yet chosen what follows.
	settling bool
	// log, if set, is told when a job starts and ends.
	log func(msg string, r SyncReport, err error)

	// An array without a bitmap that was not stopped cleanly needs a
	// resync of every range (md's resync_offset): fullPending says so,
	// fullPos is the array sector below which it is done and flushed.
	// Under a.mu.
	fullPending bool
	fullPos     uint64
	// from is the array sector from which the copies may differ (the
	// full resync's reached position; MaxUint64: in sync): reads past it
	// answer from the chosen copy (engine.Executor.ResyncFrom).
	from atomic.Uint64
	// marks: ranges written to some copies only since the running
	// resync started (unsynced.go).
	marks unsyncedMarks
}

// SyncReport describes a background job for the log. Sector counts are
// 512-byte sectors: of the rebuilt member for a rebuild, of the array
// otherwise.
type SyncReport struct {
	Kind    string
	Targets []int
	// Position is where the job starts or ended; Synced what it read and
	// copied or compared, Skipped what it did not need to (never written,
	// or clean in the bitmap).
	Position, Synced, Skipped uint64
	Mismatches                uint64 // check/repair: 4 KiB blocks
	// ReadErrorsRewritten: raid5/6 4 KiB rows (raid1/10 blocks) that
	// failed a read and were rewritten from the parity (another copy),
	// and read back right.
	ReadErrorsRewritten uint64
	// LostRows: raid5/6 4 KiB rows that more members failed to read than
	// the parity covers (check/repair): lost, left as they are.
	LostRows uint64
	// Regions is, for a re-add, how many bitmap regions it had to recover
	// (those written while the member was away, or not yet clean); 0
	// otherwise.
	Regions int
}

// SetSyncLog sets the function told when a background job starts and
// ends.
func (a *Array) SetSyncLog(f func(msg string, r SyncReport, err error)) {
	if a.sync != nil {
		a.sync.mu.Lock()
		a.sync.log = f
		a.sync.mu.Unlock()
	}
}

// memberIO is resync.Members over the array's member files (pread/pwrite
// at the data offset; p is aligned by the syncer). With a member timeout
// (Array.MemberTimeout), an operation that has not returned by then fails
// with errMemberTimeout, which fails the member (the job's OnMemberError),
// and is left behind: a hung member must not hang the job, and with it
// StopSync, del and replace. The I/O then runs on a bounce buffer of its
// own, so a late completion can neither land in memory the syncer has
// reused (read) nor take its data from it (write).
type memberIO struct {
	a *Array
	// rw does the I/O (read, write; p nil: flush); tests replace it.
	rw func(d Device, p []byte, off int64, write bool) error
	// bounce holds bounce buffers of bounceSize bytes for reuse.
	bounce *bouncePool
}

func newMemberIO(a *Array) memberIO {
	return memberIO{a: a, rw: memberRW, bounce: &bouncePool{}}
}

// memberRW is the I/O of new memberIOs (tests replace it).
var memberRW = deviceRW

// deviceRW reads or writes p at off on d, or flushes d when p is nil.
func deviceRW(d Device, p []byte, off int64, write bool) error {
	switch {
	case p == nil:
		return d.Flush()
	case write:
		return d.WriteAt(p, off)
	default:
		return d.ReadAt(p, off)
	}
}

// file is role's device and its time in the role (roleDevice: a re-add
// of the same device is a new one), read together under a.mu.
func (m memberIO) file(role int) (*Member, *roleDevice, error) {
	m.a.mu.Lock()
	defer m.a.mu.Unlock()
	if f := m.a.Members[role]; f != nil {
		return f, m.a.current[role].Load(), nil
	}
	return nil, nil, fmt.Errorf("role %d has no member", role)
}

func (m memberIO) ReadAt(role int, p []byte, sector uint64) error {
	return m.do(role, p, sector, false)
}

func (m memberIO) WriteAt(role int, p []byte, sector uint64) error {
	return m.do(role, p, sector, true)
}

func (m memberIO) Flush(role int) error { return m.do(role, nil, 0, false) }

// faultyRoleError is the error of sync I/O to a role failed meanwhile (by
// a timeout, an I/O error, or a fail request): not waited for, and taken
// as the member timing out (errors.Is errMemberTimeout), but said as what
// it is.
type faultyRoleError int

func (e faultyRoleError) Error() string        { return fmt.Sprintf("role %d is faulty", int(e)) }
func (e faultyRoleError) Is(target error) bool { return target == errMemberTimeout }

func (m memberIO) do(role int, p []byte, sector uint64, write bool) (err error) {
	if m.a.Engine != nil && m.a.Engine.State().Members[role].State == engine.MemberFaulty {
		// Failed (a timeout below, say): not waited for again.
		return faultyRoleError(role)
	}
	f, dev, err := m.file(role)
	if err != nil {
		return err
	}
	if p != nil && f.lateWrites.Load() > 0 {
		// A given-up write is still out on it (see Member.lateWrites):
		// nothing goes to the device until it returns. It is waited for
		// up to the member timeout (it may be the device's from before
		// the role's failure, the same device re-added since: a device
		// that answers is not failed for it), then taken as the device
		// not answering.
		wait := time.Now().Add(max(m.a.MemberTimeout, lateWait))
		for f.lateWrites.Load() > 0 && time.Now().Before(wait) {
			time.Sleep(lateWait)
		}
		if f.lateWrites.Load() > 0 {
			return fmt.Errorf("role %d: a write given up after the member timeout is still out: %w", role, errMemberTimeout)
		}
	}
	off := int64(m.a.dataOffset + sector<<9)
	// Counted as the member's operation (metrics), as a queue's are; one
	// given up after the member timeout as a failed one.
	op := metrics.OpRead
	switch {
	case p == nil:
		op = metrics.OpFlush
	case write:
		op = metrics.OpWrite
	}
	start := time.Now()
	defer func() { m.a.countMemberOp(role, f, op, len(p), time.Since(start), err) }()
	timeout := m.a.MemberTimeout
	if timeout <= 0 {
		f.jobOut.Add(1) // (busy until it returns: Member.jobOut)
		defer f.jobOut.Add(-1)
		return m.rw(f.Device, p, off, write)
	}
	var b []byte
	if p != nil {
		if b, err = m.bounce.get(len(p)); err != nil {
			return err
		}
		if write {
			copy(b, p)
		}
	}
	done := make(chan error, 1) // buffered: a late answer never blocks
	var lmu sync.Mutex
	var finished, given bool
	var key lateKey
	f.jobOut.Add(1) // (until it returns, given up or not: Member.jobOut)
	go func() {
		// The device holds a reference on its file for the call: closing
		// the member meanwhile cannot free its descriptor for reuse under
		// the late I/O (and takes no lock that a hung call would keep).
		ioErr := m.rw(f.Device, b, off, write)
		f.jobOut.Add(-1)
		lmu.Lock()
		finished = true
		if given {
			lateEnd(key) // a rebuild onto the device may start now
			if write {
				f.lateWrites.Add(-1)
			}
		}
		lmu.Unlock()
		done <- ioErr
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err == nil && p != nil && !write {
			copy(p, b)
		}
		m.bounce.put(b)
		return err
	case <-t.C:
		// b stays with the I/O: never reused, never unmapped. Until it
		// returns, no rebuild writes the device (a late write would land
		// on the rebuilt data).
		lmu.Lock()
		if !finished {
			given, key = true, lateBegin(f)
			if write {
				f.lateWrites.Add(1)
			}
		}
		lmu.Unlock()
		// A hung member is failed (but the last in-sync copy), as a
		// queue's timeout does: a job that reads it again, range by
		// range, would wait out the timeout every time.
		if m.a.Engine != nil {
			if st, changed := m.a.failHolding(role, dev); changed {
				m.a.persist(st)
			}
		}
		return fmt.Errorf("after %v: %w", timeout, errMemberTimeout)
	}
}

// failHolding fails role (FailRedundant) if it still holds dev, the
// device an operation that failed went to, as the role held it then: a
// device put in the role since (a replacement, a spare, the same device
// re-added) is not blamed for it. Under a.mu, which a device is put in a
// role under, so the check and the failure are one step.
func (a *Array) failHolding(role int, dev *roleDevice) (*engine.ArrayState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if dev == nil || a.current[role].Load() != dev {
		return nil, false
	}
	st, changed, _ := a.Engine.FailRedundant(role)
	return st, changed
}

// bounceSize is the size of the pooled bounce buffers (a sync step).
const bounceSize = resync.StepSectors << 9

// bouncePool keeps page-aligned bounce buffers (anonymous mappings, off
// the Go heap) for memberIO; a buffer left behind with a timed-out I/O is
// simply never returned (nor unmapped). Closed, it unmaps the buffers it
// holds and each one returned to it: the garbage collector does not.
type bouncePool struct {
	mu     sync.Mutex
	free   [][]byte
	closed bool
}

// mappedBuffers counts the bounce and bitmap scratch buffers mapped and
// not unmapped (tests).
var mappedBuffers atomic.Int64

// close unmaps the pool's buffers, and those returned to it later.
func (bp *bouncePool) close() {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	bp.closed = true
	for _, b := range bp.free {
		unix.Munmap(b)
		mappedBuffers.Add(-1)
	}
	bp.free = nil
}

func (bp *bouncePool) get(n int) ([]byte, error) {
	if n > bounceSize {
		return nil, fmt.Errorf("sync I/O of %d bytes exceeds %d", n, bounceSize)
	}
	bp.mu.Lock()
	if k := len(bp.free); k > 0 {
		b := bp.free[k-1]
		bp.free = bp.free[:k-1]
		bp.mu.Unlock()
		return b[:n], nil
	}
	bp.mu.Unlock()
	b, err := unix.Mmap(-1, 0, bounceSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("map a sync bounce buffer: %w", err)
	}
	mappedBuffers.Add(1)
	return b[:n], nil
}

func (bp *bouncePool) put(b []byte) {
	if b == nil {
		return
	}
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if bp.closed {
		unix.Munmap(b[:cap(b)])
		mappedBuffers.Add(-1)
		return
	}
	bp.free = append(bp.free, b[:cap(b)])
}

// initSync sets up the barrier and the syncer (arrays with redundancy).
func (a *Array) initSync(spec CreateSpec) {
	a.memberOps = make([]atomic.Pointer[memberCounters], len(a.Members))
	if a.Engine.Level() == engine.Level0 {
		return
	}
	// The syncer's barrier, shared with read repair: the write barrier
	// (copies); a parity array's stripe lock, as its requests take it.
	if a.Engine.Parity != nil {
		a.xbar = newExclusiveBarrier(&stripeBarrier{a: a})
	} else {
		a.barrier = engine.NewBarrier(barrierShift, a.wakeQueues)
		a.xbar = newExclusiveBarrier(a.barrier)
	}
	a.startRepairs()
	var bar resync.Barrier = a.xbar
	io := newMemberIO(a)
	a.syncBounce = io.bounce
	a.sync = &syncer{a: a, s: resync.New(a.Engine, bar, io, resync.Config{
		MinBytesPerSec: spec.SyncMinBytes, MaxBytesPerSec: spec.SyncMaxBytes, Busy: a.busy})}
	// A rebuild found at assembly resumes from its recorded offset, which
	// every superblock write until it moves on must keep.
	a.checkpoint = map[int]uint64{}
	for r, m := range a.Engine.State().Members {
		if m.State == engine.MemberRebuilding {
			a.checkpoint[r] = m.RebuildOffset
		}
	}
	// Without a bitmap, an array not stopped cleanly needs a full resync,
	// from where a stopped one had got to. Read before the first
	// superblock write (the daemon's SetClean(false)) changes them.
	if !a.Created && a.Bitmap == nil {
		var fresh *engine.Superblock
		for _, sb := range a.SBs {
			if sb != nil && (fresh == nil || sb.Events > fresh.Events) {
				fresh = sb
			}
		}
		if fresh != nil && !fresh.Clean {
			a.sync.fullPending = true
			if fresh.ResyncOffset < a.Engine.ArraySectors() {
				a.sync.fullPos = fresh.ResyncOffset
			}
		}
	}
	// A raid10 member put in sync as it is, without a bitmap: every
	// region (see promotedStale).
	if a.promotedStale {
		a.sync.fullPending, a.sync.fullPos = true, 0
	}
	// A new array without a bitmap has no record of what was written:
	// like md, it syncs in full from the start (--assume-clean skips
	// that, as mdadm's does), so that its copies are equal throughout.
	if a.Created && a.Bitmap == nil && !spec.AssumeClean {
		a.sync.fullPending, a.sync.fullPos = true, 0
	}
	a.sync.from.Store(math.MaxUint64)
	a.sync.marks.from = math.MaxUint64
	if a.sync.fullPending {
		a.sync.from.Store(a.sync.fullPos)
	}
}

// cleanState is what a superblock write records for a stop that is clean
// or not: an array stopped in the middle of its full resync is not clean,
// and records where the resync resumes; a running one records 0 (after a
// crash everything is resynced: writes in flight may have reached one copy
// only, below the position too). Called with a.mu held.
func (a *Array) cleanState(clean bool) (bool, uint64) {
	if a.sync == nil || a.Bitmap != nil {
		return clean, 0
	}
	pending, pos := a.resyncFrom()
	if !pending {
		return clean, 0
	}
	if clean {
		return false, pos
	}
	return false, 0
}

// fullResync reports whether a full resync is pending, and from where.
func (a *Array) fullResync() (bool, uint64) {
	if a.sync == nil {
		return false, 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sync.fullPending, a.sync.fullPos
}

// wakeQueues wakes every queue (the barrier was lowered over writes it
// turned away). Never blocks.
func (a *Array) wakeQueues() {
	a.qmu.Lock()
	defer a.qmu.Unlock()
	for _, h := range a.queues {
		h.q.Wake()
	}
}

// busy reports user I/O since the last call (the syncer backs off). Sync
// goroutine.
func (a *Array) busy() bool {
	var n uint64
	a.qmu.Lock()
	for _, h := range a.queues {
		n += h.requests.Load()
	}
	a.qmu.Unlock()
	b := n != a.lastRequests
	a.lastRequests = n
	return b
}

// needsResync reports whether some region awaits resync (without a
// bitmap: the array's full resync).
func (a *Array) needsResync() bool {
	if a.Bitmap == nil {
		pending, _ := a.fullResync()
		return pending || a.marked()
	}
	for r := range a.Bitmap.Geometry().Regions {
		if a.Bitmap.NeedsSync(r) {
			return true
		}
	}
	return false
}

// StartBackground starts what the array needs after assembly: resuming a
// rebuild recorded in the superblocks, or resyncing the regions the bitmap
// says may differ after an unclean stop. Call it once the device serves.
func (a *Array) StartBackground() {
	if a.sync == nil {
		return
	}
	if a.resumeRebuild() {
		// A resync pending too runs when it ends (nextJob).
		return
	}
	if a.Engine.Parity != nil {
		// A raid6 with a role out resyncs around it, but a spare standing
		// by takes the role first and the resync follows its rebuild, as
		// md's recovery goes before its resync.
		a.activateSpare()
		if a.sync.busy() {
			return
		}
	}
	if a.startResync() {
		return
	}
	a.activateSpare()
}

// resumeRebuild starts a rebuild of the roles rebuilding, from the
// lowest of their positions, and reports whether there were any.
func (a *Array) resumeRebuild() bool {
	var targets []int
	var from uint64
	a.mu.Lock()
	for r, m := range a.Engine.State().Members {
		if m.State == engine.MemberRebuilding && a.Members[r] != nil {
			if len(targets) == 0 || m.RebuildOffset < from {
				from = m.RebuildOffset
			}
			targets = append(targets, r)
		}
	}
	a.mu.Unlock()
	if len(targets) == 0 {
		return false
	}
	return a.sync.start(resync.Job{Kind: resync.Rebuild, Targets: targets, Start: from, Need: a.neededWritten}, 0) == nil
}

// rebuildingBesides reports whether a role not in targets is rebuilding.
func (a *Array) rebuildingBesides(targets []int) bool {
	for r, m := range a.Engine.State().Members {
		if m.State == engine.MemberRebuilding && !slices.Contains(targets, r) {
			return true
		}
	}
	return false
}

// startResync starts the resync the array needs, if it needs one, and
// reports whether it did.
func (a *Array) startResync() bool {
	if !a.needsResync() || a.parityDegraded() {
		// (A parity array's resync waits for its members when as many
		// are out as its parity covers: see parityDegraded.)
		return false
	}
	job := resync.Job{Kind: resync.Resync, Need: a.neededResync, Unit: a.unit()}
	if a.Bitmap != nil {
		job.Skip = a.skipTo(a.Bitmap.NeedsSync)
	}
	if a.Bitmap == nil {
		_, job.Start = a.fullResync()
		job.Need = nil
	}
	return a.sync.start(job, 0) == nil
}

// nextJob starts what is left to do once a job has ended (not stopped):
// a spare for a role that failed meanwhile, else the rebuild of roles
// left rebuilding (a member error stopped the job and took its member
// out: a source copy that failed, which md fails and goes on from the
// others; or the job was a spare's, taken for that source while another
// role's rebuild waited), else a resync that is still pending (one
// waiting behind a rebuild, or one stopped by a member error). A job that
// failed without taking a member out is not retried at once (it would
// fail the same way): a resync stays pending for the next job's end or
// assembly, a rebuild for the next assembly, re-add or spare.
func (a *Array) nextJob(job resync.Job, err error, dropGen uint64) {
	a.activateSpare()
	if a.sync.busy() {
		return
	}
	if job.Kind == resync.Rebuild {
		if err != nil {
			a.sync.mu.Lock()
			a.sync.rebuildFailed, a.sync.rebuildFailedGen = true, dropGen
			a.sync.mu.Unlock()
		}
		resume := err == nil && a.rebuildingBesides(job.Targets)
		resume = resume || err != nil && a.Engine.State().DropGen != dropGen
		if resume && a.resumeRebuild() {
			return
		}
	} else if a.rebuildingBesides(nil) && !a.rebuildFailedHere() && a.resumeRebuild() {
		// A role took a device while this job ran (a spare activated
		// as a check started: its rebuild was refused then): md runs
		// recovery before anything else. Not a rebuild that failed
		// with the members as they are (a block no copy can read): it
		// waits for the next assembly, re-add or spare, as md's
		// recovery_disabled.
		return
	}
	if job.Kind == resync.Resync && err != nil && a.Engine.State().DropGen == dropGen {
		return
	}
	a.startResync()
}

// rebuildFailedHere reports whether a rebuild failed with the members as
// they are now (no role failed, removed or put back since).
func (a *Array) rebuildFailedHere() bool {
	a.sync.mu.Lock()
	defer a.sync.mu.Unlock()
	return a.sync.rebuildFailed && a.sync.rebuildFailedGen == a.Engine.State().DropGen
}

// busy reports whether a job runs.
func (y *syncer) busy() bool {
	_, b := y.active()
	return b
}

// active reports the job that runs, if one does.
func (y *syncer) active() (resync.Kind, bool) {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.kind, y.running
}

// neededResync is a resync's Need: some region of the range awaits resync.
func (a *Array) neededResync(sector, sectors uint64) bool {
	first, last := a.Bitmap.Regions(sector, sectors)
	for r := first; r <= last; r++ {
		if a.Bitmap.NeedsSync(r) {
			return true
		}
	}
	return false
}

// neededChecked is a check's Need: some region of the range was written
// and needs no resync (checkedRegion); without a bitmap, the range is
// below the full resync's position (all of it when none is pending): the
// copies above it are not meant to agree yet.
func (a *Array) neededChecked(sector, sectors uint64) bool {
	if a.Bitmap == nil {
		return sector+sectors <= a.sync.from.Load()
	}
	first, last := a.Bitmap.Regions(sector, sectors)
	for r := first; r <= last; r++ {
		if a.checkedRegion(r) {
			return true
		}
	}
	return false
}

func (a *Array) checkedRegion(r int) bool { return a.Bitmap.Written(r) && !a.Bitmap.NeedsSync(r) }

// skipTo returns a job's Skip for a bitmap region predicate (nil without
// a bitmap): the start of the first region at or after a sector for which
// want holds.
func (a *Array) skipTo(want func(r int) bool) func(uint64) uint64 {
	if a.Bitmap == nil {
		return nil
	}
	bm := a.Bitmap
	g := bm.Geometry()
	return func(sector uint64) uint64 {
		for r := int(sector / g.RegionSectors); r < g.Regions; r++ {
			if want(r) {
				return max(sector, uint64(r)*g.RegionSectors)
			}
		}
		return g.ArraySectors
	}
}

// unit is the granule of sync steps: the bitmap's region size (0: none),
// so that a step is one region's (or part of one).
func (a *Array) unit() uint64 {
	if a.Bitmap == nil {
		return 0
	}
	return a.Bitmap.Geometry().RegionSectors
}

// neededWritten is a rebuild's Need: with a bitmap, ranges never written
// hold nothing to copy.
func (a *Array) neededWritten(sector, sectors uint64) bool {
	if a.Bitmap == nil {
		return true
	}
	first, last := a.Bitmap.Regions(sector, sectors)
	for r := first; r <= last; r++ {
		if a.Bitmap.Written(r) {
			return true
		}
	}
	return false
}

// Check starts a check (repair=false) or repair of every copy.
func (a *Array) Check(repair bool) error {
	if a.sync == nil {
		return errors.New("a raid0 array has no copies to check")
	}
	k := resync.Check
	if repair {
		k = resync.Repair
	}
	// Never-written regions are skipped: the array was not synced when it
	// was created, so their copies hold whatever the devices held; so are
	// regions awaiting resync (first written and not yet synced in full,
	// or left dirty by a crash), which the resync makes equal anyway (md
	// does not check while a resync is pending either).
	job := resync.Job{Kind: k, Need: a.neededChecked, Skip: a.skipTo(a.checkedRegion), Unit: a.unit()}
	if a.Engine.Parity != nil {
		if err := a.checkParityJob(k); err != nil {
			return err
		}
		job.Need = a.neededParityChecked
	}
	return a.sync.start(job, 0)
}

// StopSync stops the background job, if any, and waits for it (its
// position is checkpointed so it resumes at the next assembly). It is for
// stopping the array: no job starts after it.
func (a *Array) StopSync() {
	if a.sync == nil {
		return
	}
	a.sync.mu.Lock()
	a.sync.stopped = true // the job that ends does not start another
	cancel, done := a.sync.cancel, a.sync.done
	a.sync.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// WaitSync waits for the background job, if any, to end, and for the
// jobs it hands on to (a resync after a rebuild).
func (a *Array) WaitSync() {
	if a.sync == nil {
		return
	}
	y := a.sync
	for y.marks.kicking.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
	y.mu.Lock()
	done := y.done
	y.mu.Unlock()
	for done != nil {
		<-done
		y.mu.Lock()
		next := y.done
		if !y.running || next == done {
			next = nil
		}
		y.mu.Unlock()
		done = next
	}
}

// SyncRecord is what an array remembers of its last background jobs:
// detail's last action and last check with their results, and
// mismatch_cnt. CarrySyncRecord gives it to the array assembled again in
// the same run by a grow, as md keeps them across a resize.
type SyncRecord struct {
	last                    resync.Kind
	lastHad                 bool
	lastRes                 string
	lastCheck, lastCheckRes string
	mism                    uint64
}

// SyncRecord returns what the array remembers of its last jobs.
func (a *Array) SyncRecord() SyncRecord {
	if a.sync == nil {
		return SyncRecord{}
	}
	y := a.sync
	y.mu.Lock()
	defer y.mu.Unlock()
	return SyncRecord{last: y.last, lastHad: y.lastHad, lastRes: y.lastRes, lastCheck: y.lastCheck, lastCheckRes: y.lastCheckRes, mism: y.mism}
}

// CarrySyncRecord takes r (another Array's SyncRecord, of the same array)
// where this array has run no job yet.
func (a *Array) CarrySyncRecord(r SyncRecord) {
	if a.sync == nil {
		return
	}
	y := a.sync
	y.mu.Lock()
	defer y.mu.Unlock()
	if !y.lastHad && r.lastHad {
		y.last, y.lastHad, y.lastRes = r.last, true, r.lastRes
	}
	if y.lastCheck == "" && r.lastCheck != "" {
		y.lastCheck, y.lastCheckRes, y.mism = r.lastCheck, r.lastCheckRes, r.mism
	}
}

// SyncStatus describes the background job.
func (a *Array) SyncStatus() SyncStatus {
	s := SyncStatus{Action: "idle"}
	if a.sync == nil {
		return s
	}
	y := a.sync
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.lastHad {
		s.LastAction, s.LastResult = y.last.String(), y.lastRes
	}
	if y.lastCheck != "" {
		s.LastCheck, s.LastCheckResult = y.lastCheck, y.lastCheckRes
	}
	s.MismatchCnt = y.mism * (4096 / 512)
	if y.running && (y.kind == resync.Check || y.kind == resync.Repair) {
		// As md: a check or repair starts its count at 0 and counts up
		// as it goes (the last one's is no longer what the array holds).
		s.MismatchCnt = 0
		if y.s.Runs() != y.runsAt { // (its Run has started)
			s.MismatchCnt = y.s.Mismatches() * (4096 / 512)
		}
	}
	s.ResyncNeeded = a.needsResync()
	if !y.running {
		// (A resync being kicked, for a write's marks or a first write,
		// is about to start.)
		s.Settling = y.settling || y.marks.kicking.Load() > 0
		return s
	}
	s.Action = y.kind.String()
	s.Targets = y.targets
	done, total := y.s.Progress()
	if y.s.Runs() == y.runsAt {
		// Its Run has not started (a rebuild waiting for a target's late
		// I/O, say): Progress is still the last job's.
		done, total = y.startPos, 0
	}
	s.Done, s.Total = done<<9, total<<9
	if el := time.Since(y.started).Seconds(); el > 0.5 {
		// Jobs can resume part-way (a rebuild from its checkpoint, a
		// resync from the recorded resync offset): speed over what this
		// run did.
		s.SpeedBytes = float64(s.Done-min(s.Done, y.startPos<<9)) / el
		if s.SpeedBytes > 0 && s.Total > s.Done {
			s.ETASeconds = float64(s.Total-s.Done) / s.SpeedBytes
		}
	}
	return s
}

// start runs job in the background. regions, when > 0, is how many bitmap
// regions the job has to copy (a re-add), for the log.
func (y *syncer) start(job resync.Job, regions int) error {
	y.mu.Lock()
	if y.running {
		k := y.kind
		y.mu.Unlock()
		return fmt.Errorf("a %s is running: try again once it ends (`detail` shows its progress)", k)
	}
	if y.stopped {
		y.mu.Unlock()
		return errors.New("the array is stopping")
	}
	if job.Kind == resync.Resync {
		// Ranges marked unsynced from now on may be behind its position.
		job.Start = y.a.resyncStarting(job.Start)
	}
	ctx, cancel := context.WithCancel(context.Background())
	y.running, y.kind, y.targets, y.started, y.startPos = true, job.Kind, job.Targets, time.Now(), job.Start
	y.runsAt = y.s.Runs()
	y.cancel, y.done = cancel, make(chan struct{})
	done, log := y.done, y.log
	y.mu.Unlock()
	a := y.a
	if job.Kind == resync.Resync && y.a.Bitmap == nil {
		// Its start is the full resync's position now (resyncStarting
		// took the marks below the recorded one): a stop before its
		// first checkpoint records no more than that.
		a.mu.Lock()
		if !a.sync.fullPending || job.Start < a.sync.fullPos {
			a.sync.fullPending, a.sync.fullPos = true, job.Start
		}
		a.mu.Unlock()
	}
	job.OnMemberError = func(role int, err error) {
		// The last in-sync copy is kept (the job stops with the error).
		if st, changed, _ := a.Engine.FailRedundant(role); changed {
			a.persist(st)
		}
	}
	// A member that does not answer is failed, not rewritten (raid5/6
	// rewrite a read error from the parity).
	job.Unrepairable = func(err error) bool { return errors.Is(err, errMemberTimeout) }
	job.OnReadErrorRewritten = func(int) { a.readRepairs.Add(1) } // (ublkraid_read_repairs_total)
	// The targets as the job starts: a target failed and given a new
	// device meanwhile (Since changes) is not the job's any more.
	st0 := a.Engine.State()
	dropGen := st0.DropGen
	since := make([]uint64, len(job.Targets))
	for i, t := range job.Targets {
		since[i] = st0.Members[t].Since
	}
	switch job.Kind {
	case resync.Rebuild:
		job.Progress = a.rebuildProgress(ctx, job.Targets, since)
	case resync.Resync:
		job.Progress = a.resyncProgress()
		if a.Bitmap == nil {
			// Until its first flush the job reports durable 0: below its
			// start is synced already (start), not undone by that.
			from := job.Start
			job.Progress = func(reached, durable uint64) error {
				return a.fullResyncProgress(reached, max(durable, from))
			}
		}
	}
	if log != nil {
		log("sync started", SyncReport{Kind: job.Kind.String(), Targets: job.Targets, Position: job.Start, Regions: regions}, nil)
	}
	go func() {
		defer close(done)
		defer cancel()
		var res resync.Result
		var err error
		if job.Kind == resync.Rebuild {
			// A target device with given-up I/O still out (a member that
			// hung, re-added) is written only once that I/O has returned.
			err = a.waitLate(ctx, job.Targets)
		}
		if err == nil {
			res, err = y.s.Run(ctx, job)
		}
		if err == nil {
			err = a.finishJob(job, since)
		} else {
			err = errors.Join(err, a.stoppedJob(job))
		}
		y.mu.Lock()
		y.running, y.cancel, y.last, y.lastHad = false, nil, job.Kind, true
		next := !errors.Is(err, context.Canceled)
		y.settling = next
		y.lastRes = "ok"
		if err != nil {
			y.lastRes = err.Error()
		} else if res.LostRows > 0 {
			y.lastRes = fmt.Sprintf("ended with %d 4 KiB rows unreadable on more members than the parity covers: their data is lost (left as it is)", res.LostRows)
		}
		if job.Kind == resync.Check || job.Kind == resync.Repair {
			y.mism = res.Mismatches
			y.lastCheck, y.lastCheckRes = job.Kind.String(), y.lastRes
		}
		y.mu.Unlock()
		if log != nil {
			log("sync ended", SyncReport{Kind: job.Kind.String(), Targets: job.Targets, Position: res.End,
				Synced: res.Synced, Skipped: res.Skipped, Mismatches: res.Mismatches, Regions: regions,
				ReadErrorsRewritten: res.ReadErrorsRewritten, LostRows: res.LostRows}, err)
		}
		if next {
			a.nextJob(job, err, dropGen)
			y.mu.Lock()
			y.settling = false
			y.mu.Unlock()
		}
	}()
	return nil
}

// rebuildProgress advances the targets' rebuild offset as the job goes
// and checkpoints the durable position in the superblocks now and then.
func (a *Array) rebuildProgress(ctx context.Context, targets []int, since []uint64) func(reached, durable uint64) error {
	var last time.Time
	return func(reached, durable uint64) error {
		if g := a.Engine.Parity; g != nil {
			// Under the stripes the offset passes: a raid5/6 write
			// planned with a target unreadable at a stripe logs the
			// target's new rows in X; were the offset to pass the stripe
			// (and reach the superblocks) while that write is out, a
			// crash before its data landed would find the target
			// readable there with its old rows, and the replay would
			// write a parity for the new ones. Writes in flight on those
			// stripes end first; later ones are planned with the new
			// offset. Through the barrier the job and read repair share
			// (one waiter on the stripe lock's sync side at a time: they
			// share its wake-up); a job stopped meanwhile moves nothing.
			st := a.Engine.State()
			from := reached
			for i, t := range targets {
				if m := st.Members[t]; m.State == engine.MemberRebuilding && m.Since == since[i] {
					from = min(from, m.RebuildOffset)
				}
			}
			if from < reached {
				per := g.ChunkSectors * uint64(g.DataMembers())
				s0, s1 := from/g.ChunkSectors, (reached-1)/g.ChunkSectors
				if err := a.xbar.Raise(ctx, s0*per, (s1-s0+1)*per); err != nil {
					return err
				}
				a.advanceRebuild(targets, since, reached)
				a.xbar.Lower()
			}
		} else {
			a.advanceRebuild(targets, since, reached)
		}
		st := a.Engine.State()
		a.mu.Lock()
		defer a.mu.Unlock()
		changed := false
		for i, t := range targets {
			if st.Members[t].State == engine.MemberRebuilding && st.Members[t].Since == since[i] && durable > a.checkpoint[t] {
				a.checkpoint[t], changed = durable, true
			}
		}
		if changed && time.Since(last) >= checkpointEvery {
			last = time.Now()
			return a.writeSuperblocks(a.Engine.State(), false)
		}
		return nil
	}
}

// advanceRebuild moves the in-memory rebuild offset of targets still
// rebuilding since since up to reached.
func (a *Array) advanceRebuild(targets []int, since []uint64, reached uint64) {
	a.Engine.Update(func(ms []engine.MemberStatus) {
		for i, t := range targets {
			if ms[t].State == engine.MemberRebuilding && ms[t].Since == since[i] && reached > ms[t].RebuildOffset {
				ms[t].RebuildOffset = reached
			}
		}
	})
}

// resyncProgress returns a resync's Progress: it marks the regions the
// durable position passed since the last call resynced (they may be
// cleared again). Each region once: one marked after the position passed
// it is the next resync's.
func (a *Array) resyncProgress() func(_, durable uint64) error {
	done := 0 // regions below are marked
	return func(_, durable uint64) error {
		if a.Bitmap == nil {
			return nil
		}
		if end := int(durable / a.Bitmap.Geometry().RegionSectors); end > done {
			a.resyncDone(done, end-1)
			done = end
		}
		return nil
	}
}

// stoppedJob records where a job that did not finish stopped: a rebuild's
// last checkpoint is written to the superblocks (the periodic ones may be
// up to checkpointEvery behind), so the next assembly resumes there.
func (a *Array) stoppedJob(job resync.Job) error {
	if job.Kind != resync.Rebuild {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writeSuperblocks(a.Engine.State(), false)
}

// fullResyncProgress records how far the full resync of an array without
// a bitmap has durably got (a stop records it in the superblocks).
func (a *Array) fullResyncProgress(reached, durable uint64) error {
	// Below reached the copies are equal: reads may balance there.
	a.fullResyncReached(reached)
	a.mu.Lock()
	defer a.mu.Unlock()
	// The job's own position (it started at or below the recorded one:
	// start), not past a range marked since it started: a position taken
	// from an earlier job, which a restart from a lower mark did not
	// reach again, would record as synced a range the copies differ in.
	u := &a.sync.marks
	u.mu.Lock()
	a.sync.fullPos = min(durable, u.from)
	u.mu.Unlock()
	return nil
}

// finishJob records a finished job: rebuilt targets become active.
func (a *Array) finishJob(job resync.Job, since []uint64) error {
	switch job.Kind {
	case resync.Resync:
		if a.Bitmap != nil {
			a.resyncDone(0, a.Bitmap.Geometry().Regions-1)
		} else {
			a.mu.Lock()
			a.fullResyncFinished()
			a.mu.Unlock()
		}
	case resync.Rebuild:
		st := a.Engine.Update(func(ms []engine.MemberStatus) {
			for i, t := range job.Targets {
				if ms[t].State == engine.MemberRebuilding && ms[t].Since == since[i] {
					ms[t] = engine.MemberStatus{State: engine.MemberActive}
				}
			}
		})
		if a.Bitmap != nil {
			for _, t := range job.Targets {
				if st.Members[t].State == engine.MemberActive {
					a.Bitmap.SetMissing(t, false)
				}
			}
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, t := range job.Targets {
			delete(a.checkpoint, t)
		}
		return a.writeSuperblocks(st, false)
	}
	return nil
}

// ReAdd returns a member that left the array (failed, removed or stale) to
// its role and rebuilds it: with a write-intent bitmap only the regions
// written while it was away, else everything written (see readdPlan for
// when the bitmap cannot tell). A member that ran without the array's
// members (split brain) is refused.
func (a *Array) ReAdd(path string) error { return a.addMember(path, -1, true, false, false) }

// Replace puts a new device or a spare into role (which must be faulty or
// missing) and rebuilds it.
func (a *Array) Replace(role int, path string) error {
	return a.addMember(path, role, false, false, false)
}

// ReplaceMember puts the device at path (a spare of the array, or a new
// device) into role and rebuilds it. Everything is checked first (the
// role, the background job, the new device: size, block size, another
// array's superblock, signatures of data); only then is an active or
// rebuilding member of the role failed (recorded in the survivors'
// superblocks) and the new device put in. A refusal changes nothing.
// With force a new device carrying another array's superblock or a
// signature of data is overwritten.
func (a *Array) ReplaceMember(role int, path string, force bool) error {
	return a.addMember(path, role, false, true, force)
}

// addMember brings path into role (for a re-add: its own role); with
// failActive an active or rebuilding role is failed first, once every
// check passed.
func (a *Array) addMember(path string, role int, readd, failActive, force bool) error {
	if a.sync == nil {
		return errors.New("a raid0 array cannot rebuild a member")
	}
	// No spare may take the role between the failure and the
	// replacement (a failure activates spares).
	a.spareMu.Lock()
	defer a.spareMu.Unlock()
	a.mu.Lock()
	var spare *spareMember
	for i := range a.spares {
		if a.spares[i].m.Path != path {
			continue
		}
		if readd {
			a.mu.Unlock()
			return fmt.Errorf("%s is a spare: use replace --with", path)
		}
		// A spare named by replace: it takes the role.
		sp := a.spares[i]
		spare = &sp
	}
	var m *Member
	for r, old := range a.Members {
		if old != nil && old.Path == path {
			if !readd {
				st := a.Engine.State().Members[r].State
				a.mu.Unlock()
				if st == engine.MemberFaulty {
					return fmt.Errorf("%s already holds role %d: use re-add", path, r)
				}
				return fmt.Errorf("%s already holds role %d", path, r)
			}
			role, m = r, old // still open since it failed: reuse it
		}
	}
	a.mu.Unlock()
	reused := m != nil
	var uuid [16]byte
	switch {
	case spare != nil:
		m, uuid = spare.m, spare.uuid
	case m == nil:
		var err error
		if m, err = openMember(a.open, path); err != nil {
			return err
		}
	}
	drop := func() {
		if spare == nil {
			a.closeIfNew(m)
		}
	}
	if lateOn(m) {
		// Refused as md refuses to remove a device with I/O pending
		// (EBUSY): a write given up after the member timeout (before a
		// failure, a re-add's) may still land on the device, over what
		// the new member is written meanwhile; and a request writing to
		// it would find it busy and fail it again.
		drop()
		return fmt.Errorf("%s: I/O given up after the member timeout is still out on it: it can be added once the device answers", path)
	}
	var plan *readdPlan
	if readd {
		p, err := a.previousRole(m)
		if err == nil && reused && p.role != role {
			err = fmt.Errorf("%s holds role %d but its superblock says role %d", path, role, p.role)
		}
		if err != nil {
			drop()
			return err
		}
		role, plan = p.role, &p
		a.mu.Lock()
		holder := a.Members[role]
		st := a.Engine.State().Members[role].State
		a.mu.Unlock()
		if holder != nil && holder != m && (st == engine.MemberActive || st == engine.MemberRebuilding) {
			// Not checkAdd's "fail and remove it first": that would fail
			// the device that took the role since (a healthy copy).
			drop()
			return fmt.Errorf("%s held role %d, which %s holds since (%s): it is no longer a member; add -n N --spare %s --force makes it a spare", path, role, holder.Path, st, path)
		}
	}
	if err := a.checkAdd(m, role, failActive); err != nil {
		drop()
		return err
	}
	var wipe signatures
	if !readd && spare == nil {
		var err error
		if wipe, err = a.checkNewDevice(m, a.refSB(), force); err != nil {
			drop()
			return err
		}
	}
	// Every check passed. The new device's signatures go first: a device
	// that cannot take that write must not cost the array the member it
	// was to replace.
	if err := wipeSignatures(m, wipe); err != nil {
		drop()
		return err
	}
	if failActive && !readd {
		// Nor may a device that takes no write at all (read-only, dead):
		// its superblock block written back as it is, durably, before the
		// member it replaces is failed. A spare too: it took its
		// superblock when it was added, but may have died since, idle.
		// (Its superblock is written only when it is added and when it
		// takes a role, both under spareMu, held here: nothing newer is
		// written back over.)
		b, err := m.ReadBlock(engine.SuperblockOffset, engine.SuperblockSize)
		if err == nil {
			err = m.WriteBlockSync(engine.SuperblockOffset, b)
		}
		if err != nil {
			drop()
			return fmt.Errorf("%s cannot be written: %w", m.Path, err)
		}
		// Its write-hole log area too (raid5/6): emptied now, while it is
		// no member (nothing reads or logs there), so that an area it
		// cannot take refuses the replace before the member goes.
		if err := a.resetLogArea(m); err != nil {
			drop()
			return err
		}
	}
	logReset := failActive && !readd
	// From here on the array changes.
	if failActive {
		if s := a.Engine.State().Members[role].State; s == engine.MemberActive || s == engine.MemberRebuilding {
			if err := a.Fail(role); err != nil {
				drop()
				return err
			}
		}
	}
	if spare != nil {
		sp := *spare
		if !a.takeSpare(sp) {
			return fmt.Errorf("%s is no longer a spare", path)
		}
		err := a.addOpenPlanReset(sp.m, role, nil, sp.uuid, !logReset)
		if err != nil {
			a.returnSpare(sp)
		}
		return err
	}
	return a.addOpenPlanReset(m, role, plan, uuid, !logReset)
}

// takeSpare removes sp from the spares; false if it is not one any more.
func (a *Array) takeSpare(sp spareMember) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.spares {
		if s.m == sp.m {
			a.spares = append(a.spares[:i:i], a.spares[i+1:]...)
			return true
		}
	}
	return false
}

// checkAdd checks that m can be put into role (see addOpen): the role
// faulty or missing (or, with active, in use and not the last copy of
// some data), no background job running, m large enough and of the
// array's block size. Reads only.
func (a *Array) checkAdd(m *Member, role int, active bool) error {
	if n := a.Engine.MemberCount(); role < 0 || role >= n {
		return fmt.Errorf("role %d: the array has roles 0..%d", role, n-1)
	}
	if err := checkWritable(m); err != nil { // (a re-added member, a spare named by replace)
		return err
	}
	switch s := a.Engine.State().Members[role].State; {
	case s == engine.MemberFaulty || s == engine.MemberMissing:
	case !active:
		return fmt.Errorf("role %d is %s: fail and remove it first", role, s)
	case !a.Engine.CoveredWithout(role):
		return fmt.Errorf("role %d holds the last copy of some data: failing it would fail the array", role)
	}
	if k, busy := a.sync.active(); busy && k != resync.Resync {
		// Refused before anything changes: a member put in the role now
		// would have no job to rebuild it. (A resync gives way:
		// preemptResync.)
		return fmt.Errorf("a %s is running: the new member can be added when it ends", k)
	}
	ref := a.refSB()
	if need := ref.DataOffset + a.Engine.MemberSectors()<<9; uint64(m.Size) < need {
		return fmt.Errorf("%s is %d bytes; role %d needs at least %d", m.Path, m.Size, role, need)
	}
	if lb := a.logicalBlock(); lb != 0 && m.LogicalBlock != lb {
		return fmt.Errorf("%s has %d-byte logical blocks; the array has %d", m.Path, m.LogicalBlock, lb)
	}
	return nil
}

// addOpen puts the open device m into role and rebuilds it (see
// addMember); uuid is its member UUID (zero: a new one, or for a re-add
// its own, and the role its superblock says). m is closed on error unless
// it already was a member.
func (a *Array) addOpen(m *Member, role int, readd bool, uuid [16]byte) error {
	if readd {
		plan, err := a.previousRole(m)
		if err != nil {
			a.closeIfNew(m)
			return err
		}
		return a.addOpenPlan(m, plan.role, &plan, uuid)
	}
	return a.addOpenPlan(m, role, nil, uuid)
}

// addOpenPlan is addOpen; re, for a re-add, is what m's superblock
// allows.
func (a *Array) addOpenPlan(m *Member, role int, re *readdPlan, uuid [16]byte) error {
	return a.addOpenPlanReset(m, role, re, uuid, true)
}

// addOpenPlanReset is addOpenPlan; resetLog false: m's write-hole log area
// was emptied already (addMember, before failing the role's member).
func (a *Array) addOpenPlanReset(m *Member, role int, re *readdPlan, uuid [16]byte, resetLog bool) error {
	readd := re != nil
	drop := func() {
		if uuid == ([16]byte{}) { // a spare stays open
			a.closeIfNew(m)
		}
	}
	if err := a.checkAdd(m, role, false); err != nil {
		drop()
		return err
	}
	ref := a.refSB()
	sb := *ref
	sb.Role = uint32(role)
	if uuid != ([16]byte{}) {
		sb.MemberUUID = uuid
	} else if readd {
		// Its own: were it the role's current one while the role was
		// given to another member since, a later re-add of that other
		// device would take it for this one.
		sb.MemberUUID = re.uuid
	} else if _, err := rand.Read(sb.MemberUUID[:]); err != nil {
		drop()
		return err
	}
	// The array's data area, not all the device has: a larger new member
	// does not grow the array by itself at the next assembly (the
	// smallest data area of the members wins); `grow` does, on every
	// member at once.
	sb.DataSectors = a.Engine.MemberSectors()
	if resetLog {
		if err := a.resetLogArea(m); err != nil {
			drop()
			return err
		}
	}
	// A resync stopped here resumes once the rebuild ends (nextJob); when
	// none starts (the member's first superblock write failed, or the
	// update did), at once: a failed add must not leave it stopped.
	resume := a.preemptResync()
	defer func() {
		if resume {
			a.startResync()
		}
	}()
	if !readd {
		a.freshCounters(role, m.Path)
	}
	a.mu.Lock()
	old := a.Members[role]
	a.Members[role] = m
	a.publishFile(role, m) // with a.Members: failHolding reads both under a.mu
	a.SBs[role] = &sb
	if a.checkpoint == nil {
		a.checkpoint = map[int]uint64{}
	}
	a.checkpoint[role] = 0
	a.mu.Unlock()
	// The failed device it replaces is released (an error leaves it open
	// until the array stops: nothing to undo).
	_ = a.swapFile(role, m, old)
	st := a.Engine.Update(func(ms []engine.MemberStatus) {
		ms[role] = engine.MemberStatus{State: engine.MemberRebuilding}
	})
	if a.Bitmap != nil && a.fl != nil {
		// Regions written from now on reach the member; the whole bitmap
		// copy is rewritten (onto it too) before the superblocks name it.
		a.fl.rewriteAll()
	}
	if err := a.persist(st); err != nil {
		return err
	}
	a.mu.Lock()
	holds := a.Members[role] == m
	a.mu.Unlock()
	if !holds || a.Engine.State().Members[role].State == engine.MemberFaulty {
		// Its first superblock write failed: the update went on without
		// it (the array as before, less the member it replaced; a spare
		// may have taken the role since). Not a success.
		return fmt.Errorf("%s failed as it was put in role %d (its superblock could not be written)", m.Path, role)
	}
	need2 := a.neededWritten
	regions := 0
	if readd && re.bitmap && a.Bitmap != nil {
		// The live bitmap, asked as the rebuild goes: no region is
		// cleared while the role is not in sync, so it covers every
		// write the member missed, including those issued until it
		// became writable (a snapshot taken before would miss them).
		first, last := a.Bitmap.Regions(0, a.Engine.ArraySectors())
		for r := first; r <= last; r++ {
			if a.Bitmap.Dirty(r) {
				regions++
			}
		}
		need2 = func(sector, sectors uint64) bool {
			first, last := a.Bitmap.Regions(sector, sectors)
			for r := first; r <= last; r++ {
				if a.Bitmap.Dirty(r) {
					return true
				}
			}
			return false
		}
	}
	err := a.sync.start(resync.Job{Kind: resync.Rebuild, Targets: []int{role}, Need: need2}, regions)
	resume = err != nil
	return err
}

// preemptResync stops a running resync so that the rebuild about to start
// runs first, as md interrupts a resync for recovery (a new array's
// initial sync may take hours): the resync stays pending (its bitmap
// regions, full-resync position and marks are kept) and starts again when
// the rebuild ends (nextJob). Called with spareMu held, so that no resync
// is kicked in between. It says whether it stopped one.
func (a *Array) preemptResync() bool {
	return a.preemptJob(func(k resync.Kind) bool { return k == resync.Resync })
}

// preemptJob stops the running job if its kind is one of those which
// says, and waits until it no longer runs (see preemptResync); it says
// whether it stopped one. Called with spareMu held.
func (a *Array) preemptJob(which func(resync.Kind) bool) bool {
	y := a.sync
	y.mu.Lock()
	if !y.running || !which(y.kind) {
		y.mu.Unlock()
		return false
	}
	cancel, done := y.cancel, y.done
	y.mu.Unlock()
	cancel()
	// Until it is no longer running, not until its goroutine returns: one
	// that ended by itself meanwhile goes on to nextJob, whose spare
	// activation waits for spareMu, held here.
	for {
		y.mu.Lock()
		running := y.running && y.done == done
		y.mu.Unlock()
		if !running {
			return true
		}
		time.Sleep(time.Millisecond)
	}
}

func (a *Array) closeIfNew(m *Member) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, old := range a.Members {
		if old == m {
			return
		}
	}
	m.Close()
}

// readdPlan is how a member returning to the array is rebuilt, from its
// own superblock.
type readdPlan struct {
	role int      // the role it held
	uuid [16]byte // its member UUID
	// bitmap: only the regions the write-intent bitmap says dirty need
	// copying; otherwise every written region does.
	bitmap bool
}

// previousRole is the role m held in this array according to its own
// superblock and how to rebuild it, or why it cannot be re-added.
//
// The bitmap covers every write since its regions were last cleared, and
// no region is cleared while a role is not in sync; so only the regions
// dirty now need copying onto a member that left the role, if its data
// was current when it left and no region was cleared since. That is md's
// rule (events_cleared): its superblock events must not be older than the
// bitmap's events cleared, the generation of the last clear, kept in the
// bitmap header and durable before the clear (bitmap.Bitmap.EventsCleared).
// A member that left, after which the array ran on (with it back, or with
// its role given to another device) and cleared regions, has older events,
// and every written region is copied, whether it comes back in the same
// run or a later one. Every written region is copied too when its own
// superblock says it was still being rebuilt (its data is current only
// below its recovery offset), when its superblock is newer than the
// array's (it changed outside the array), and when it is older than the
// last superblock this run wrote to it: an image of the device taken
// while it was still in the array (not as it left) carries a generation in
// which regions may have been cleared after the image was taken, which
// events cleared cannot tell.
// A member that ran without the array's members (engine.Diverged: a split
// brain) is refused: copying one side's dirty regions onto the other
// would mix both sides' data, block by block.
func (a *Array) previousRole(m *Member) (readdPlan, error) {
	notMember := fmt.Errorf("%s is not a member of this array: use replace to put a new device in", m.Path)
	sb, _, err := engine.ReadSuperblock(m.ReadBlock, m.Size)
	if err != nil && !errors.Is(err, engine.ErrNoSuperblock) && !errors.Is(err, engine.ErrCorruptSuperblock) {
		return readdPlan{}, fmt.Errorf("%s: read its superblock: %w", m.Path, err)
	}
	cur := a.refSB()
	if err != nil || sb.ArrayUUID != cur.ArrayUUID || sb.IsSpare() || int(sb.Role) >= a.Engine.MemberCount() {
		return readdPlan{}, notMember
	}
	// As at assembly: bounded by its device, and the data and bitmap
	// where the array has them, in the array's geometry (none of these
	// changes in an array's life). Otherwise its data is not where the
	// array would take it to be.
	if err := sb.CheckMemberSize(uint64(m.Size)); err != nil {
		return readdPlan{}, fmt.Errorf("%s: %w", m.Path, err)
	}
	if sb.Level != cur.Level || sb.Layout != cur.Layout || sb.ChunkSectors != cur.ChunkSectors || sb.Members != cur.Members ||
		sb.DataOffset != cur.DataOffset || sb.BitmapOffset != cur.BitmapOffset || sb.BitmapBytes != cur.BitmapBytes {
		return readdPlan{}, fmt.Errorf("%s: its superblock (level %d, layout %#x, chunk %d, %d members, data at byte %d, bitmap at byte %d, %d bytes) disagrees with the array's (level %d, layout %#x, chunk %d, %d members, data at byte %d, bitmap at byte %d, %d bytes): corrupt or crafted superblock; replace --force puts the device in as a new one",
			m.Path, sb.Level, sb.Layout, sb.ChunkSectors, sb.Members, sb.DataOffset, sb.BitmapOffset, sb.BitmapBytes,
			cur.Level, cur.Layout, cur.ChunkSectors, cur.Members, cur.DataOffset, cur.BitmapOffset, cur.BitmapBytes)
	}
	role := int(sb.Role)
	if engine.Diverged(sb, cur) {
		return readdPlan{}, fmt.Errorf("%w: %s ran without this array's members (its superblock, events %d, records them failed or missing, and this array, events %d, records it gone): its data differs and a re-add would mix both sides; to keep this array's data, wipe it and put it in role %d with replace (a full rebuild)",
			engine.ErrSplitBrain, m.Path, sb.Events, cur.Events, role)
	}
	p := readdPlan{role: role, uuid: sb.MemberUUID, bitmap: true}
	if a.Bitmap == nil || sb.Events < a.Bitmap.EventsCleared() || sb.Roles[role].State == engine.RoleRebuilding || sb.Events > cur.Events {
		p.bitmap = false
	}
	a.mu.Lock()
	if last := a.SBs[role]; last != nil && last.MemberUUID == sb.MemberUUID && sb.Events < last.Events {
		// Older than the last superblock this run wrote to it (an old
		// copy of the device): regions may have been cleared since.
		p.bitmap = false
	}
	a.mu.Unlock()
	return p, nil
}

// NamesMember reports whether the array's superblock names member (a
// member UUID) in a role (active, faulty or rebuilding) or as a spare: a
// device carrying it is still the array's, not one failed and removed (a
// missing role keeps its last member's UUID: that device is free).
func (a *Array) NamesMember(member [16]byte) bool {
	ref := a.refSB()
	if ref == nil {
		return true
	}
	for _, e := range ref.Roles {
		if e.State != engine.RoleUnused && e.State != engine.RoleMissing && e.Member == member {
			return true
		}
	}
	return false
}

// refSB is a copy of a current superblock of the array (superblock
// writes update a.SBs in place under a.mu).
func (a *Array) refSB() *engine.Superblock {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.Engine.State()
	// The freshest: a member behind (one put in sync by a forced
	// assembly, until the first update; one that failed the last
	// update while holding the last copy of some data) keeps its own
	// generation there.
	var ref *engine.Superblock
	for r, s := range a.SBs {
		if s != nil && st.Members[r].State == engine.MemberActive && (ref == nil || s.Events > ref.Events) {
			ref = s
		}
	}
	if ref == nil {
		for _, s := range a.SBs {
			if s != nil && (ref == nil || s.Events > ref.Events) {
				ref = s
			}
		}
	}
	if ref == nil {
		return nil
	}
	c := *ref
	return &c
}

// do runs fn on the flusher goroutine and waits for it.
func (f *flusher) do(fn func()) {
	r := flushReq{fn: fn, reply: make(chan flushReq, 1)}
	select {
	case f.reqs <- r:
		<-r.reply
	case <-f.done:
	}
}

// rewriteAll schedules a rewrite of the whole bitmap copy.
func (f *flusher) rewriteAll() { f.do(f.bm.RewriteAll) }
