package resync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Members does the job's member I/O. sector is relative to the member's
// data offset, in 512-byte sectors; p is 4096-byte aligned and a multiple of
// 512 bytes long. A short read or write is an error.
type Members interface {
	ReadAt(role int, p []byte, sector uint64) error
	WriteAt(role int, p []byte, sector uint64) error
	Flush(role int) error
}

// Kind is what a job does.
type Kind int

// Job kinds.
const (
	// Rebuild copies every array sector the targets hold onto them, from
	// readable copies on other members, walking the targets' member
	// sectors upwards (the targets are normally MemberRebuilding).
	Rebuild Kind = iota + 1
	// Resync copies each range from its chosen copy (the lowest-numbered
	// readable member holding it) to the other readable copies, after an
	// unclean stop. It walks array sectors.
	Resync
	// Check reads every readable copy of each range, compares them with
	// the chosen copy in 4 KiB blocks and counts the blocks that differ.
	Check
	// Repair is Check that also rewrites the differing blocks of the other
	// copies from the chosen copy.
	Repair
)

func (k Kind) String() string {
	switch k {
	case Rebuild:
		return "rebuild"
	case Resync:
		return "resync"
	case Check:
		return "check"
	case Repair:
		return "repair"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// StepSectors is the largest range one step copies: 1 MiB.
const StepSectors = 2048

// BlockSectors is the unit of comparison of Check and Repair: 4 KiB.
const BlockSectors = 8

var (
	// ErrNoRedundancy: raid0 has a single copy of everything, so there is
	// nothing to rebuild, resync or check.
	ErrNoRedundancy = errors.New("raid0 has no redundancy: nothing to sync")
	// ErrBusy: another job is running on this array.
	ErrBusy = errors.New("a sync job is already running on this array")
	// ErrTargetGone: a rebuild target was failed, removed or replaced (failed
	// and put back) while it ran.
	ErrTargetGone = errors.New("rebuild target is no longer in use")
)

// MemberError is a member failure that stopped a job.
type MemberError struct {
	Role   int
	Op     string // "read", "write", "flush" or "read back" (of a rewrite)
	Sector uint64 // member sector (data-relative) of the operation
	Err    error
}

func (e *MemberError) Error() string {
	if e.Op == "flush" {
		return fmt.Sprintf("member %d: flush: %v", e.Role, e.Err)
	}
	return fmt.Sprintf("member %d: %s at sector %d: %v", e.Role, e.Op, e.Sector, e.Err)
}

func (e *MemberError) Unwrap() error { return e.Err }

// Clock is the time source of throttling and flush intervals; tests inject
// a fake one.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx ends (then returning ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Config is a Syncer's throttling, like md's sync_speed_min/max.
type Config struct {
	// MinBytesPerSec: the job backs off for user I/O only while faster
	// than this (md's sync_speed_min). Zero means md's default, 1000 KiB/s.
	MinBytesPerSec uint64
	// MaxBytesPerSec: the job is never faster than this (md's
	// sync_speed_max). Zero means no limit.
	MaxBytesPerSec uint64
	// Busy reports whether user I/O is going on; between Min and Max the
	// job sleeps briefly while it returns true. Nil: never busy.
	Busy func() bool
	// Backoff is one back-off sleep while Busy; default 10 ms.
	Backoff time.Duration
	// FlushInterval is how often a job flushes the members it wrote and
	// reports a new durable position; default 5 s. Jobs also flush at
	// the end.
	FlushInterval time.Duration
	// Clock defaults to the real one.
	Clock Clock
	// RetryUnit is the block size, in sectors, to which a failed read of
	// the chosen copy is narrowed (the logical block size, as
	// engine.Executor's; default 8, 4 KiB): the blocks it can read keep
	// its data, only the others come from another copy.
	RetryUnit uint32
}

// Job describes one run.
type Job struct {
	Kind Kind
	// Targets are the roles a Rebuild writes (at least one); nil for the
	// other kinds.
	Targets []int
	// Start is where to begin (resume): a member sector for Rebuild, an
	// array sector for the others.
	Start uint64
	// Need, if set, tells whether array range [arraySector,
	// arraySector+sectors) needs the job (a write-intent bitmap says
	// whether it may differ); ranges it refuses are skipped.
	Need func(arraySector, sectors uint64) bool
	// Skip, if set with Need, returns the first array sector at or after
	// its argument that Need may accept (the array's size if none): the
	// job jumps over a run of ranges Need refuses instead of stepping
	// through it. (Resync, Check, Repair.)
	Skip func(arraySector uint64) uint64
	// Unit, if set, is a granule of the array (the bitmap's region size):
	// steps of Resync, Check and Repair never cross a multiple of it, so
	// that Need answers for whole steps.
	Unit uint64
	// Progress, if set, is called after every step: sectors below reached
	// are done, and below durable flushed (see the package doc). A
	// returned error stops the job with it.
	Progress func(reached, durable uint64) error
	// OnMemberError, if set, is told of each member error that stops the
	// job.
	OnMemberError func(role int, err error)
	// Unrepairable, if set, reports whether a member's read error must
	// not be repaired (raid5/6 Resync, Check, Repair rewrite what a
	// member could not read from the parity, as md does): a member that
	// does not answer (a timeout) is failed instead.
	Unrepairable func(err error) bool
	// OnReadErrorRewritten, if set, is told of each 4 KiB row (raid5/6,
	// rewritten from the parity) or block (raid1/10, from another copy)
	// of a member rewritten after a read error and read back right:
	// Result.ReadErrorsRewritten as it happens.
	OnReadErrorRewritten func(role int)
}

// Result is what a job did. Sector counts are array sectors, except
// Rebuild's, which are the targets' member sectors.
type Result struct {
	Kind       Kind
	Start, End uint64 // positions the run began and ended at
	Synced     uint64 // sectors read (and copied where needed)
	Skipped    uint64 // sectors skipped: Need refused, or no data (rebuild padding)
	// Mismatches counts, for each readable copy, the 4 KiB array blocks
	// in which it differed from the chosen copy (Check, Repair): md's
	// mismatch_cnt, which adds a differing range once per copy that
	// differs, in 4 KiB units rather than sectors (raid5/6: 4 KiB rows
	// whose parity differs).
	Mismatches uint64
	Repaired   uint64 // 4 KiB block writes to copies that differed (Repair), per copy
	ReadErrors uint64 // member reads that failed and were served by another copy
	// ReadErrorsRewritten counts the 4 KiB rows of raid5/6 members (or
	// blocks of raid1/10 copies) that failed a read and were rewritten
	// from the parity (another copy), and read back right (ReadErrors
	// counts the failed reads that led to them).
	ReadErrorsRewritten uint64
	// LostRows counts the 4 KiB rows of raid5/6 stripes that more members
	// failed to read than the parity covers (Check, Repair): their data
	// is lost, and they were left as they are (no member failed for
	// them, as md's scrub).
	LostRows uint64
}

// Barrier is the side of engine.Barrier a job uses: Raise a range (user
// writes to it wait), copy, Lower. A caller that shares one
// engine.Barrier between a Syncer and other raisers wraps it so that one
// range is raised at a time.
type Barrier interface {
	Raise(ctx context.Context, sector, sectors uint64) error
	Lower()
}

// Syncer runs sync jobs for one array.
type Syncer struct {
	arr     *engine.Array
	bar     Barrier
	members Members
	cfg     Config
	running atomic.Bool
	done    atomic.Uint64
	total   atomic.Uint64
	mism    atomic.Uint64 // the running (or last) job's Result.Mismatches so far
	runs    atomic.Uint64 // jobs Run has started (after resetting the above)
}

// New returns a Syncer for arr, whose user writes go through bar.
func New(arr *engine.Array, bar Barrier, m Members, cfg Config) *Syncer {
	if cfg.MinBytesPerSec == 0 {
		cfg.MinBytesPerSec = 1000 << 10
	}
	if cfg.MaxBytesPerSec != 0 && cfg.MinBytesPerSec > cfg.MaxBytesPerSec {
		cfg.MinBytesPerSec = cfg.MaxBytesPerSec
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 10 * time.Millisecond
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.RetryUnit == 0 {
		cfg.RetryUnit = 8
	}
	return &Syncer{arr: arr, bar: bar, members: m, cfg: cfg}
}

// Progress returns the position of the running (or last) job and its end:
// member sectors for a rebuild, array sectors otherwise. Safe from any
// goroutine.
func (s *Syncer) Progress() (done, total uint64) {
	return s.done.Load(), s.total.Load()
}

// Mismatches is what the running (or last) job has counted in
// Result.Mismatches so far, as md's mismatch_cnt counts up while a check
// runs. Safe from any goroutine.
func (s *Syncer) Mismatches() uint64 { return s.mism.Load() }

// Runs counts the jobs Run has started: Progress and Mismatches are a
// job's once Runs has moved past its value from before the job's Run.
func (s *Syncer) Runs() uint64 { return s.runs.Load() }

// run is the state of one Run.
type run struct {
	*Syncer
	ctx     context.Context
	job     Job
	g       engine.Geometry
	bufs    [][]byte // one per copy (check, repair); bufs[0] otherwise
	unitBuf []byte   // one retry unit (readOne)
	// bad marks, per copy of a check or repair step (by its place in
	// member order), the sectors whose read failed when narrowed.
	bad     [engine.MaxCopies][StepSectors / 64]uint64
	locs    [engine.MaxCopies]engine.Location
	par     *parityRun // raid5/6 (parity.go); nil for copies
	written uint64     // members written since the last flush
	flushed time.Time  // when
	durable uint64     // position reached at the last flush
	thr     throttle
	res     Result
	// since is each rebuild target's MemberStatus.Since when the job
	// started: a target failed and put back meanwhile (a new device in its
	// role) has another, and the job's work is not on it.
	since []uint64
}

// Run executes job and returns what it did. It stops early with ctx's
// error (after flushing and reporting durable progress, so the job can be
// resumed from there), with a *MemberError, or with Progress's error.
func (s *Syncer) Run(ctx context.Context, job Job) (Result, error) {
	if !s.running.CompareAndSwap(false, true) {
		return Result{}, ErrBusy
	}
	defer s.running.Store(false)
	r := &run{Syncer: s, ctx: ctx, job: job, g: s.arr.Geo, res: Result{Kind: job.Kind, Start: job.Start}}
	var total uint64
	var err error
	if s.arr.Parity != nil {
		total, err = r.setupParity()
	} else {
		total, err = r.setupCopies()
	}
	if err != nil {
		return r.res, err
	}
	job = r.job // (a parity job's start is rounded down to its stripe)
	r.res.Start = job.Start
	if job.Start > total {
		return r.res, fmt.Errorf("%s: start %d is beyond the end (%d)", job.Kind, job.Start, total)
	}
	if job.Kind == Rebuild {
		st := s.arr.State()
		for _, t := range job.Targets {
			r.since = append(r.since, st.Members[t].Since)
		}
	}
	r.unitBuf = alignedBuf(int(s.cfg.RetryUnit) << 9)
	s.total.Store(total)
	s.done.Store(job.Start)
	s.mism.Store(0)
	s.runs.Add(1)
	now := s.cfg.Clock.Now()
	r.flushed = now
	r.thr = throttle{cfg: &s.cfg, markTime: now}

	pos := job.Start
	for pos < total && err == nil {
		if err = ctx.Err(); err != nil {
			break
		}
		var n uint64
		var did bool
		switch {
		case r.par != nil && job.Kind == Rebuild:
			n, did, err = r.parityRebuildStep(pos)
		case r.par != nil:
			n, did, err = r.parityArrayStep(pos)
		case job.Kind == Rebuild:
			n, did, err = r.rebuildStep(pos)
		default:
			n, did, err = r.arrayStep(pos)
		}
		if err != nil {
			break
		}
		pos += n
		s.done.Store(pos)
		s.mism.Store(r.res.Mismatches)
		r.res.End = pos
		if did {
			if err = r.thr.after(ctx, n<<9); err != nil {
				break
			}
		}
		if err = r.report(pos, false); err != nil {
			break
		}
	}
	r.res.End = pos
	var merr *MemberError
	if err != nil && !errors.As(err, &merr) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// Stopped from outside: make what was copied durable, so a
		// restart resumes from here.
		if ferr := r.report(pos, true); ferr != nil {
			return r.res, errors.Join(err, ferr)
		}
		return r.res, fmt.Errorf("%s stopped at %d: %w", job.Kind, pos, err)
	}
	if err != nil {
		return r.res, fmt.Errorf("%s stopped at %d: %w", job.Kind, pos, err)
	}
	if err := r.report(pos, true); err != nil {
		return r.res, fmt.Errorf("%s at the end: %w", job.Kind, err)
	}
	return r.res, nil
}

// setupCopies checks job against a raid1/10 array (raid0: nothing to
// sync), makes the copy buffers and returns the job's end position.
func (r *run) setupCopies() (uint64, error) {
	g, job := r.g, r.job
	if g.Level == engine.Level0 {
		return 0, ErrNoRedundancy
	}
	total := g.ArraySectors()
	if err := checkKind(job, g.Members); err != nil {
		return 0, err
	}
	if job.Kind == Rebuild {
		total = g.MemberSectors
	}
	nbufs := 1
	if job.Kind == Check || job.Kind == Repair {
		nbufs = g.Copies()
	}
	r.bufs = make([][]byte, nbufs)
	for i := range r.bufs {
		r.bufs[i] = alignedBuf(StepSectors << 9)
	}
	return total, nil
}

// checkKind checks job's kind and targets for an array of members roles.
func checkKind(job Job, members int) error {
	switch job.Kind {
	case Rebuild:
		if len(job.Targets) == 0 {
			return errors.New("rebuild: no target member")
		}
		for i, t := range job.Targets {
			if t < 0 || t >= members || slices.Contains(job.Targets[:i], t) {
				return fmt.Errorf("rebuild: invalid target list %v for %d members", job.Targets, members)
			}
		}
	case Resync, Check, Repair:
		if len(job.Targets) != 0 {
			return fmt.Errorf("%s takes no targets", job.Kind)
		}
	default:
		return fmt.Errorf("unknown sync job kind %d", int(job.Kind))
	}
	return nil
}

// report calls Progress, flushing the written members first when the flush
// interval has passed or force is set.
func (r *run) report(pos uint64, force bool) error {
	// A target replaced during the step must not be reported rebuilt up to
	// pos: only the step's part is on the new device.
	if err := r.targetsKept(r.arr.State()); err != nil {
		return err
	}
	now := r.cfg.Clock.Now()
	durable := uint64(0)
	if force || now.Sub(r.flushed) >= r.cfg.FlushInterval {
		if err := r.flush(); err != nil {
			return err
		}
		r.flushed = now
		durable = pos
		r.durable = pos
	} else {
		durable = r.durable
	}
	if r.job.Progress == nil {
		return nil
	}
	return r.job.Progress(pos, durable)
}

// flush flushes every member written since the last flush.
func (r *run) flush() error {
	for w := r.written; w != 0; w &= w - 1 {
		role := bits.TrailingZeros64(w)
		if err := r.members.Flush(role); err != nil {
			return r.memberError(role, "flush", 0, err)
		}
	}
	r.written = 0
	return nil
}

// noAnswer reports whether err is a member's that does not answer (a
// timeout: Job.Unrepairable): its reads are not retried unit by unit
// nor its blocks rewritten (each would wait the timeout out again); it
// is failed, kept if it holds the last copy, and the job stops, as a
// raid5/6 job does.
func (r *run) noAnswer(err error) bool {
	return r.job.Unrepairable != nil && r.job.Unrepairable(err)
}

func (r *run) memberError(role int, op string, sector uint64, err error) error {
	e := &MemberError{Role: role, Op: op, Sector: sector, Err: err}
	if r.job.OnMemberError != nil {
		r.job.OnMemberError(role, e)
	}
	return e
}

func (r *run) write(role int, p []byte, sector uint64) error {
	r.written |= 1 << uint(role)
	if err := r.members.WriteAt(role, p, sector); err != nil {
		return r.memberError(role, "write", sector, err)
	}
	return nil
}

// targetsKept checks that every rebuild target is still the member the job
// started on, in use: not failed, removed, or failed and put back (a new
// device in its role, whose RebuildOffset the job's progress must not
// move).
func (r *run) targetsKept(st *engine.ArrayState) error {
	for i, since := range r.since {
		t := r.job.Targets[i]
		if !writable(st, t) || st.Members[t].Since != since {
			return fmt.Errorf("member %d: %w", t, ErrTargetGone)
		}
	}
	return nil
}

// readable mirrors engine's rule (plan.go): an active member, or a
// rebuilding one whose rebuilt part covers the range up to end.
func readable(st *engine.ArrayState, role int, end uint64) bool {
	m := st.Members[role]
	return m.State == engine.MemberActive || (m.State == engine.MemberRebuilding && end <= m.RebuildOffset)
}

// readableNow is readable for a copy about to be read with st, the state
// the step took after raising its range: the member must also still be
// the one st saw.
func (r *run) readableNow(st *engine.ArrayState, role int, end uint64) bool {
	return readable(st, role, end) && r.unchanged(st, role)
}

// unchanged reports whether role still holds the member st saw (same
// Since). One failed and replaced since (a new device in its role, full
// of anything) must not be read: its data would be copied to the other
// copies as good. It is asked before a read and again after it: a device
// is put into a role only after the role became faulty or missing (a new
// Since), so unchanged after a read means the read was the member's.
func (r *run) unchanged(st *engine.ArrayState, role int) bool {
	return r.arr.State().Members[role].Since == st.Members[role].Since
}

func writable(st *engine.ArrayState, role int) bool {
	m := st.Members[role].State
	return m == engine.MemberActive || m == engine.MemberRebuilding
}

// rebuildStep rebuilds the targets' member sectors [ms, ms+n) and returns
// n; did reports whether any I/O was done.
func (r *run) rebuildStep(ms uint64) (n uint64, did bool, err error) {
	g := r.g
	n = min(StepSectors, g.MemberSectors-ms)
	if g.Level != engine.Level1 {
		n = min(n, g.ChunkSectors-ms&(g.ChunkSectors-1))
	}
	st := r.arr.State()
	if err := r.targetsKept(st); err != nil {
		return 0, false, err
	}
	// A target rebuilt past ms already (a job for several targets starts
	// at the lowest RebuildOffset) holds current data there, which reads
	// may be answering from (the chosen copy of a range awaiting resync):
	// it is not copied again, from a source whose data may differ. Steps
	// end at such offsets, so that a target is rebuilt or not over the
	// whole step.
	for _, t := range r.job.Targets {
		if m := st.Members[t]; m.State == engine.MemberRebuilding && m.RebuildOffset > ms && m.RebuildOffset < ms+n {
			n = m.RebuildOffset - ms
		}
	}
	rebuilt := func(t int) bool {
		m := st.Members[t]
		return m.State == engine.MemberRebuilding && m.RebuildOffset >= ms+n
	}
	var doneMask uint64 // targets handled in this step
	for i, t := range r.job.Targets {
		if doneMask&(1<<uint(i)) != 0 {
			continue
		}
		if rebuilt(t) {
			r.res.Skipped += n
			continue
		}
		a, ok := g.ArraySectorOf(t, ms)
		if !ok {
			r.res.Skipped += n
			continue
		}
		// Every target holding the same array range at this member
		// sector (all of them for raid1) gets the same data.
		var group uint64
		for j := i; j < len(r.job.Targets); j++ {
			if b, ok := g.ArraySectorOf(r.job.Targets[j], ms); ok && b == a && !rebuilt(r.job.Targets[j]) {
				group |= 1 << uint(j)
			}
		}
		doneMask |= group
		if r.job.Need != nil && !r.job.Need(a, n) {
			r.res.Skipped += n
			continue
		}
		if err := r.bar.Raise(r.ctx, a, n); err != nil {
			return 0, did, err
		}
		err := r.rebuildRange(a, n, ms, group)
		r.bar.Lower()
		if err != nil {
			return 0, did, err
		}
		did = true
		r.res.Synced += n
	}
	return n, did, nil
}

// rebuildRange copies array range [a, a+n) from a readable copy to the
// targets in group (indexes into Job.Targets), at member sector ms. The
// range is raised.
func (r *run) rebuildRange(a, n, ms uint64, group uint64) error {
	st := r.arr.State() // after Raise: any write since sees it too
	buf := r.bufs[0][:n<<9]
	isTarget := func(role int) bool {
		for j, t := range r.job.Targets {
			if group&(1<<uint(j)) != 0 && t == role {
				return true
			}
		}
		return false
	}
	locs := r.g.Locate(a, r.locs[:0])
	_, failed, err := r.readOne(st, locs, n, buf, isTarget)
	if err != nil {
		return err
	}
	for j, t := range r.job.Targets {
		if group&(1<<uint(j)) != 0 {
			if err := r.write(t, buf, ms); err != nil {
				return err
			}
		}
	}
	return r.rewriteFailed(st, locs, failed, buf, 0)
}

// readOne reads the range into buf from the chosen copy: the first
// readable copy in locs in member order (skipping excluded roles). If that
// read fails, the range is read again block by block (RetryUnit), each
// block from the chosen copy if it can and else from the next copy that
// can: the data is the chosen copy's wherever it is readable, as user
// reads of a range awaiting resync return it. It returns the index of the
// chosen copy if it read the whole range (-1 otherwise) and the mask of
// copies (indexes into locs) that failed some read.
func (r *run) readOne(st *engine.ArrayState, locs []engine.Location, n uint64, buf []byte, exclude func(int) bool) (src int, failed uint32, err error) {
	var order [engine.MaxCopies]int
	cands := order[:0]
	for _, i := range r.byMember(locs) {
		l := locs[i]
		if (exclude == nil || !exclude(l.Member)) && readable(st, l.Member, l.Sector+n) {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return -1, 0, fmt.Errorf("array sectors %d+%d: %w", r.arrSector(locs), n, engine.ErrNoCopy)
	}
	l := locs[cands[0]]
	var lastErr error
	if r.unchanged(st, l.Member) {
		e := r.members.ReadAt(l.Member, buf, l.Sector)
		switch {
		case e == nil && r.unchanged(st, l.Member):
			return cands[0], 0, nil
		case e == nil:
			// Replaced during the read: the data may be the new device's.
			lastErr = fmt.Errorf("member %d was replaced", l.Member)
		case r.noAnswer(e):
			return -1, 1 << uint(cands[0]), r.memberError(l.Member, "read", l.Sector, e)
		default:
			failed = 1 << uint(cands[0])
			lastErr = &MemberError{Role: l.Member, Op: "read", Sector: l.Sector, Err: e}
		}
	}
	unit := uint64(r.cfg.RetryUnit)
	for off := uint64(0); off < n; {
		k := min(unit-(l.Sector+off)%unit, n-off)
		p := r.unitBuf[:k<<9]
		got := false
		for _, i := range cands {
			c := locs[i]
			if !r.unchanged(st, c.Member) {
				if lastErr == nil {
					lastErr = fmt.Errorf("member %d was replaced", c.Member)
				}
				continue
			}
			if e := r.members.ReadAt(c.Member, p, c.Sector+off); e != nil {
				failed |= 1 << uint(i)
				if r.noAnswer(e) {
					return -1, failed, r.memberError(c.Member, "read", c.Sector+off, e)
				}
				lastErr = &MemberError{Role: c.Member, Op: "read", Sector: c.Sector + off, Err: e}
				continue
			}
			if !r.unchanged(st, c.Member) {
				lastErr = fmt.Errorf("member %d was replaced", c.Member)
				continue
			}
			got = true
			break
		}
		if !got {
			return -1, failed, r.unreadable(locs, n, lastErr)
		}
		copy(buf[off<<9:], p)
		off += k
	}
	r.res.ReadErrors += uint64(bits.OnesCount32(failed))
	return -1, failed, nil
}

// unreadable is the error stopping the job at a range no copy could
// serve. It blames no member: failing one would not bring the data back
// and would take a copy of every other block away (md: "Don't fail
// devices as that won't really help"; md records a bad block, of which
// this project keeps no list, so the job stops there instead).
func (r *run) unreadable(locs []engine.Location, n uint64, last error) error {
	return fmt.Errorf("array sectors %d+%d: %w: %w", r.arrSector(locs), n, engine.ErrNoCopy, last)
}

func (r *run) arrSector(locs []engine.Location) uint64 {
	a, _ := r.g.ArraySectorOf(locs[0].Member, locs[0].Sector)
	return a
}

// rewriteFailed writes good data over the copies that failed reading it,
// and reads each rewrite back (md's fix_read_error): a bad sector the
// rewrite did not cure is a member error, as a failed write is.
// buf is the data at off sectors into the range.
func (r *run) rewriteFailed(st *engine.ArrayState, locs []engine.Location, failed uint32, buf []byte, off uint64) error {
	for i, l := range locs {
		if failed&(1<<uint(i)) != 0 && writable(st, l.Member) {
			if err := r.write(l.Member, buf, l.Sector+off); err != nil {
				return err
			}
			if err := r.readBack(l.Member, len(buf), l.Sector+off); err != nil {
				return err
			}
			// Counted as raid5/6 counts its rows (md's scrub reports
			// the errors it corrected).
			for range max(1, len(buf)>>12) {
				r.res.ReadErrorsRewritten++
				if r.job.OnReadErrorRewritten != nil {
					r.job.OnReadErrorRewritten(l.Member)
				}
			}
		}
	}
	return nil
}

// readBack reads n bytes of role at sector, a retry unit at a time, into
// the unit buffer (free here: readOne copied out of it).
func (r *run) readBack(role, n int, sector uint64) error {
	for off := 0; off < n; off += len(r.unitBuf) {
		k := min(len(r.unitBuf), n-off)
		at := sector + uint64(off>>9)
		if err := r.members.ReadAt(role, r.unitBuf[:k], at); err != nil {
			return r.memberError(role, "read back", at, err)
		}
	}
	return nil
}

// byMember returns the indexes of locs ordered by member number, so that
// the chosen copy is the lowest-numbered member's.
func (r *run) byMember(locs []engine.Location) []int {
	var idx [engine.MaxCopies]int
	for i := range locs {
		idx[i] = i
	}
	order := idx[:len(locs)]
	// Insertion sort: at most MaxCopies entries, no allocation.
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && locs[order[j]].Member < locs[order[j-1]].Member; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	return order
}

// arrayStep handles array sectors [a, a+n) for Resync, Check and Repair.
func (r *run) arrayStep(a uint64) (n uint64, did bool, err error) {
	g := r.g
	n = min(StepSectors, g.ChunkEnd(a), g.ArraySectors()-a)
	if u := r.job.Unit; u > 0 {
		n = min(n, u-a%u)
	}
	if r.job.Need != nil && !r.job.Need(a, n) {
		if r.job.Skip != nil {
			if next := min(r.job.Skip(a+n), g.ArraySectors()); next > a+n {
				n = next - a
			}
		}
		r.res.Skipped += n
		return n, false, nil
	}
	if err := r.bar.Raise(r.ctx, a, n); err != nil {
		return 0, false, err
	}
	defer r.bar.Lower()
	if r.job.Need != nil && !r.job.Need(a, n) {
		// A write in flight until the raise left the copies different
		// and marked the range (a member kept as the last copy): not a
		// mismatch, the resync's (md holds the range against writes).
		r.res.Skipped += n
		return n, false, nil
	}
	st := r.arr.State()
	locs := g.Locate(a, r.locs[:0])
	// A step (a resync starts at a marked sector, not at a step's start)
	// ends at a rebuilding copy's offset, as rebuildStep's: below it that
	// copy is read by requests and must be synced with the others, so it
	// takes part in the whole step or in none of it.
	for _, l := range locs {
		if m := st.Members[l.Member]; m.State == engine.MemberRebuilding && m.RebuildOffset > l.Sector && m.RebuildOffset < l.Sector+n {
			n = m.RebuildOffset - l.Sector
		}
	}
	count := 0
	for _, l := range locs {
		if readable(st, l.Member, l.Sector+n) {
			count++
		}
	}
	if count < 2 {
		r.res.Skipped += n // one copy (or none) left: nothing to compare
		return n, false, nil
	}
	r.res.Synced += n
	if r.job.Kind == Resync {
		return n, true, r.resyncRange(st, locs, n)
	}
	return n, true, r.checkRange(st, locs, n)
}

// resyncRange copies the chosen copy to the other readable copies (and
// to the chosen copy too where it failed some block); a copy that failed
// a read is read back after its write (rewriteFailed).
func (r *run) resyncRange(st *engine.ArrayState, locs []engine.Location, n uint64) error {
	buf := r.bufs[0][:n<<9]
	src, failed, err := r.readOne(st, locs, n, buf, nil) // copies that failed are rewritten with the others
	if err != nil {
		return err
	}
	for _, i := range r.byMember(locs) {
		l := locs[i]
		if i == src || !readable(st, l.Member, l.Sector+n) {
			continue
		}
		if err := r.write(l.Member, buf, l.Sector); err != nil {
			return err
		}
		if failed&(1<<uint(i)) != 0 {
			if err := r.readBack(l.Member, len(buf), l.Sector); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRange reads every readable copy, counts the 4 KiB blocks that
// differ from the chosen copy and, for Repair, rewrites them. A copy
// whose read of the step fails is read again a retry unit at a time (md
// works per page): it still takes part wherever it reads, only its
// blocks that failed are left out of the comparison, and only those are
// rewritten (read repair), from the chosen copy or, where that one failed
// too, the next copy that read them.
func (r *run) checkRange(st *engine.ArrayState, locs []engine.Location, n uint64) error {
	order := r.byMember(locs)
	bytesN := int(n << 9)
	for k := range order {
		clear(r.bad[k][:]) // (an earlier step's marks are not this one's)
	}
	var ok, failed, partial uint32 // by index into locs
	var lastErr error
	src := -1
	for k, i := range order {
		l := locs[i]
		if !r.readableNow(st, l.Member, l.Sector+n) {
			continue
		}
		buf := r.bufs[k][:bytesN]
		if err := r.members.ReadAt(l.Member, buf, l.Sector); err != nil {
			if r.noAnswer(err) {
				return r.memberError(l.Member, "read", l.Sector, err)
			}
			failed |= 1 << uint(i)
			lastErr = &MemberError{Role: l.Member, Op: "read", Sector: l.Sector, Err: err}
			read, stop := r.readUnits(k, l, n, buf, &lastErr)
			if stop != nil {
				return stop
			}
			if !read {
				continue // nothing of it read
			}
			partial |= 1 << uint(k)
		}
		if !r.unchanged(st, l.Member) {
			partial &^= 1 << uint(k)
			continue // replaced during the read: not this copy's data
		}
		ok |= 1 << uint(i)
		if src < 0 {
			src = k
		}
	}
	if src < 0 {
		return r.unreadable(locs, n, lastErr)
	}
	r.res.ReadErrors += uint64(bits.OnesCount32(failed))
	good := r.bufs[src][:bytesN]
	if partial != 0 {
		// Blocks a copy could not read: the chosen copy's come from the
		// next copy that read them (as a user read of them would), and
		// every failed copy's hold the good data, so that they compare
		// equal and only a rewrite (rewriteFailed) touches them.
		for k, i := range order {
			if partial&(1<<uint(k)) == 0 || ok&(1<<uint(i)) == 0 {
				continue
			}
			for sec := uint64(0); sec < n; sec++ {
				if !r.isBad(k, sec) {
					continue
				}
				if k == src {
					from := -1
					for k2, i2 := range order {
						if k2 != src && ok&(1<<uint(i2)) != 0 && !r.isBad(k2, sec) {
							from = k2
							break
						}
					}
					if from < 0 {
						return r.unreadable(locs, n, lastErr)
					}
					copy(good[sec<<9:(sec+1)<<9], r.bufs[from][sec<<9:])
					continue
				}
				copy(r.bufs[k][sec<<9:(sec+1)<<9], good[sec<<9:])
			}
		}
	}
	const blk = BlockSectors << 9
	for off := 0; off < bytesN; off += blk {
		end := min(off+blk, bytesN)
		for k, i := range order {
			if k != src && ok&(1<<uint(i)) != 0 && !bytes.Equal(r.bufs[k][off:end], good[off:end]) {
				r.res.Mismatches++ // (each copy that differs, as md)
			}
		}
	}
	if r.job.Kind == Repair {
		for k, i := range order {
			if k == src || ok&(1<<uint(i)) == 0 {
				continue
			}
			if err := r.repairCopy(locs[i], r.bufs[k][:bytesN], good); err != nil {
				return err
			}
		}
	}
	// A copy that failed reading gets the chosen data back (read repair):
	// only its blocks that failed, where it read the rest.
	for k, i := range order {
		if failed&(1<<uint(i)) == 0 {
			continue
		}
		if partial&(1<<uint(k)) == 0 {
			if err := r.rewriteFailed(st, locs, 1<<uint(i), good, 0); err != nil {
				return err
			}
			continue
		}
		if !writable(st, locs[i].Member) {
			continue
		}
		for sec := uint64(0); sec < n; {
			if !r.isBad(k, sec) {
				sec++
				continue
			}
			end := sec
			for end < n && r.isBad(k, end) {
				end++
			}
			if err := r.rewriteFailed(st, locs, 1<<uint(i), good[sec<<9:end<<9], sec); err != nil {
				return err
			}
			sec = end
		}
	}
	return nil
}

// readUnits reads copy l (the k-th in member order) of the step again a
// retry unit at a time into buf, marking the sectors of the units that
// fail in r.bad[k]; it reports whether any unit read, and stops at a
// member that does not answer (noAnswer) with its error.
func (r *run) readUnits(k int, l engine.Location, n uint64, buf []byte, lastErr *error) (read bool, stop error) {
	unit := uint64(r.cfg.RetryUnit)
	for off := uint64(0); off < n; {
		u := min(unit-(l.Sector+off)%unit, n-off)
		p := r.unitBuf[:u<<9]
		if err := r.members.ReadAt(l.Member, p, l.Sector+off); err != nil {
			if r.noAnswer(err) {
				return read, r.memberError(l.Member, "read", l.Sector+off, err)
			}
			*lastErr = &MemberError{Role: l.Member, Op: "read", Sector: l.Sector + off, Err: err}
			for sec := off; sec < off+u; sec++ {
				r.bad[k][sec/64] |= 1 << (sec % 64)
			}
		} else {
			copy(buf[off<<9:], p)
			read = true
		}
		off += u
	}
	return read, nil
}

// isBad reports whether sector sec of the step failed to read on the
// k-th copy (readUnits).
func (r *run) isBad(k int, sec uint64) bool { return r.bad[k][sec/64]&(1<<(sec%64)) != 0 }

// repairCopy rewrites the runs of 4 KiB blocks in which have differs from
// good on copy l.
func (r *run) repairCopy(l engine.Location, have, good []byte) error {
	const blk = BlockSectors << 9
	for off := 0; off < len(good); {
		if bytes.Equal(have[off:min(off+blk, len(good))], good[off:min(off+blk, len(good))]) {
			off += blk
			continue
		}
		end := off
		for end < len(good) && !bytes.Equal(have[end:min(end+blk, len(good))], good[end:min(end+blk, len(good))]) {
			end = min(end+blk, len(good))
			r.res.Repaired++
		}
		if err := r.write(l.Member, good[off:end], l.Sector+uint64(off>>9)); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// throttle paces a job between Config's min and max speeds.
type throttle struct {
	cfg       *Config
	markTime  time.Time
	markBytes uint64
	bytes     uint64
}

// throttleWindow is how long a rate measurement runs before it restarts,
// so that an idle spell does not earn a burst.
const throttleWindow = 3 * time.Second

// after accounts n bytes just synced and sleeps as the speed limits say:
// until the rate since the mark is at most MaxBytesPerSec, and, while Busy
// reports user I/O, in Backoff steps until it is at most MinBytesPerSec.
func (t *throttle) after(ctx context.Context, n uint64) error {
	t.bytes += n
	clk := t.cfg.Clock
	for {
		el := clk.Now().Sub(t.markTime)
		done := t.bytes - t.markBytes
		if max := t.cfg.MaxBytesPerSec; max != 0 {
			if need := bytesDuration(done, max); need > el {
				if err := clk.Sleep(ctx, need-el); err != nil {
					return err
				}
				continue
			}
		}
		if t.cfg.Busy != nil {
			if atMin := bytesDuration(done, t.cfg.MinBytesPerSec); atMin > el && t.cfg.Busy() {
				if err := clk.Sleep(ctx, min(t.cfg.Backoff, atMin-el)); err != nil {
					return err
				}
				continue
			}
		}
		break
	}
	if now := clk.Now(); now.Sub(t.markTime) >= throttleWindow {
		t.markTime, t.markBytes = now, t.bytes
	}
	return nil
}

// bytesDuration is how long n bytes take at rate bytes per second.
func bytesDuration(n, rate uint64) time.Duration {
	return time.Duration(float64(n) / float64(rate) * float64(time.Second))
}

// alignedBuf returns n bytes of zeroed memory aligned to 4096 bytes.
func alignedBuf(n int) []byte {
	const align = 4096
	b := make([]byte, n+align)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (align - 1))
	return b[off : off+n : off+n]
}
