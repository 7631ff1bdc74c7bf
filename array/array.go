package array

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
	"golang.org/x/sys/unix"
)

// CreateSpec describes a new array. It is ignored when the members
// already carry superblocks of one array (then the array is assembled).
type CreateSpec struct {
	// Undoable: a new array may still be undone after Open returns
	// (CloseUndoCreated) until the caller keeps it (KeepCreated): the
	// daemon's add and run, which ask the driver for its device after
	// Open wrote the members. Without it the array is kept as Open
	// returns. (An Open that fails part way through a create always
	// undoes what it wrote.)
	Undoable bool
	// Name is the new array's name; at assembly, when given, the
	// members must hold an array of that name (mdadm --assemble --name).
	Name   string
	Level  engine.Level
	Layout engine.Layout // raid10
	// ParityLayout is the layout of a raid5/6 array (md's algorithm;
	// the zero value is left-asymmetric: give LeftSymmetric for md's
	// default).
	ParityLayout engine.ParityLayout
	ChunkSectors uint64
	// LayoutGiven and ChunkGiven say the layout and chunk size were given
	// (not defaults): a create over members that hold an array of the
	// level with another one is refused rather than assembling it.
	LayoutGiven, ChunkGiven bool
	// NoBitmap creates the array without a write-intent bitmap (raid0
	// never has one).
	NoBitmap bool
	// RegionSectors is the bitmap region size (0: the default for the
	// array's size).
	RegionSectors uint64
	// AssumeClean starts the bitmap with every region clean instead of
	// never written, and an array without a bitmap without its initial
	// full sync (mdadm --assume-clean): the members are known equal.
	AssumeClean bool
	// BitmapOptions are the bitmap's run-time policy (Notify is set by
	// the array).
	BitmapOptions bitmap.Options
	// SyncMinBytes and SyncMaxBytes bound the speed of rebuild, resync and
	// check per second (md's sync_speed_min/max; 0: 1000 KiB/s and no
	// limit). Used at assembly too.
	SyncMinBytes, SyncMaxBytes uint64
	// Spares are devices to hold as spares (raid1/10): written as spares
	// of a new array; at assembly, those carrying this array's spare
	// superblock are taken as they are and blank ones are added.
	Spares []string
	// Force overwrites devices that carry a signature of data (a
	// filesystem, partition table, RAID or LVM metadata, ...: see package
	// probe): members of a new array and blank spares. Without it they
	// are refused before anything is written. At assembly it also starts
	// the array from the members given even when they disagree about each
	// other (a split brain) or the freshest records itself failed: the
	// freshest is authoritative and the others are rebuilt from it
	// (engine.AssembleOptions.Force).
	Force bool
	// WriteMostly are members (spelled as Open's paths) to read only when
	// no other copy can serve (Array.WriteMostly). At assembly each must
	// get a role: one that does not (stale, faulty, a spare) is refused
	// before anything is written.
	WriteMostly []string
	// OpenDevice opens the members and spares, here and in later
	// management (re-add, replace, add spares); nil: files and block
	// devices (ublk.OpenMember). Tests give in-memory devices.
	OpenDevice OpenDevice
	// UUID (assembly only), if set, is the array the members must hold
	// (as engine.UUIDString): others are refused before anything is
	// written (a state file's entry whose paths now name other devices).
	UUID string
	// Taken, if set, is asked about the array the members hold
	// (engine.UUIDString) before anything is written: an error refuses
	// the assembly (the daemon's: an array it serves already, or keeps
	// for its state file). A create over devices carrying superblocks of
	// other arrays asks it about each of those, and so does every later
	// add-spare or replace --with about the new device's: an array Taken
	// refuses is never written over, force or not.
	// member is nil when the whole array is assembled; it is the device's
	// member UUID when a device carrying the array's superblock would be
	// written over (a create, add-spare, replace --with): the caller may
	// then let a device its array no longer names (failed and removed)
	// go.
	Taken func(uuid string, member *[16]byte) error
	// SkipAbsent (assembly only) leaves out the members and spares whose
	// path is absent (it does not exist, or its device is gone: ENOENT,
	// ENXIO, ENODEV, ENOMEDIUM), such as a failed disk pulled before it
	// was removed from the array. The array then starts without them only
	// if every role the freshest superblock present records active has its
	// member present: an absent device can then only be a failed, missing,
	// replaced, rebuilding or spare one, which md's assembly does without
	// too. A role recorded active whose member is absent refuses the
	// assembly (ErrMemberAbsent): that member may hold the freshest data.
	// Array.Absent lists what was left out. The daemon's restart uses it.
	// With UUID set too (a restart), a present device holding no
	// superblock of that array (blank, another array's, unreadable) is
	// left out the same way (Array.Warnings says why).
	SkipAbsent bool
	// AsRecorded (assembly only) refuses, before anything is written, to
	// start the array without a member the freshest superblock records
	// active (ErrMemberAbsent): not given, or only an older device of its
	// role given (mdadm -A without --run starts no array with fewer
	// working members than it last had). The daemon's restart uses it: a
	// state file that lost a member (changed while the daemon was down)
	// must not start the array degraded, which leaves that member stale.
	AsRecorded bool
	// Queues and MaxIOBytes (raid5/6; 0: not checked) are how the array
	// is to be served: each queue needs a ring of the write-hole log
	// that holds one write's entries (parityLogRing), checked before
	// anything is written, so that a create or assembly the device
	// would refuse changes nothing.
	Queues, MaxIOBytes int
}

// ErrMemberAbsent refuses an assembly with SkipAbsent: a role the freshest
// superblock present records active has its member among the absent paths
// (or no member at all is present); or with AsRecorded: such a role's
// member is not among the devices given.
var ErrMemberAbsent = errors.New("a member in use is absent")

// heldByOther reports whether the device at path, which another holds
// (EBUSY), carries a superblock of an array other than spec.UUID, or
// none (a blank or formatted disk in use, under a failed member's old
// name), read without claiming it. A device of this array (held by a
// server that is exiting), or one whose superblock cannot be read now,
// is not. Devices opened through spec.OpenDevice (tests) cannot be read
// so: false.
func heldByOther(spec CreateSpec, path string) bool {
	if spec.OpenDevice != nil {
		return false
	}
	d, err := ublk.OpenMemberReadOnly(path)
	if err != nil {
		return false
	}
	defer d.Close()
	sb, _, err := engine.ReadSuperblock(d.ReadBlock, d.Size)
	if errors.Is(err, engine.ErrNoSuperblock) {
		return true
	}
	return err == nil && engine.UUIDString(sb.ArrayUUID) != spec.UUID
}

// absent reports whether err says a member's device is not there.
func absent(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENXIO) ||
		errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOMEDIUM)
}

// Array is an open RAID array.
type Array struct {
	Engine  *engine.Array
	Members []*Member // by role; nil when missing
	SBs     []*engine.Superblock
	Created bool // this Open created it
	// promotedStale, set by a forced assembly of raid10 that put a member
	// in sync as it is beside members in sync (engine Promoted), says
	// that the chunks it shares with them may differ where it missed
	// writes and that nothing records where: every region is resynced
	// (initSync without a bitmap; loadBitmap makes every region dirty
	// where the bitmap cleared regions since it left).
	promotedStale bool
	// Absent are the paths CreateSpec.SkipAbsent left out.
	Absent []string
	// Warnings are what Open found worth telling but not refusing (a
	// member much larger than the array uses), one line each.
	Warnings []string
	// OnMemberFailed, if set, is called once per member that becomes
	// faulty, when its failure has been recorded (under the array lock).
	OnMemberFailed func(role int, path string)
	// OnSpareActivated, if set, is told when a spare was put into a faulty
	// or missing role (err nil: its rebuild started).
	OnSpareActivated func(role int, path string, err error)

	// Bitmap is the write-intent bitmap (nil: none); BitmapInfo says what
	// assembly found on the members (nil for a new array).
	Bitmap     *bitmap.Bitmap
	BitmapInfo *bitmap.LoadInfo
	// MemberTimeout is how long a member operation may take before the
	// member is failed (0: never); set before the device is created.
	MemberTimeout time.Duration
	// OnBitmapMemberError, if set, is told of a member that failed a
	// bitmap write (the array fails the member).
	OnBitmapMemberError func(role int, err error)
	// WriteMostly is a bit mask of roles read only when no other copy can
	// serve (md's write-mostly); set before the device starts. Not stored
	// in the superblocks: give it on every run.
	WriteMostly uint64

	fl *flusher
	// open opens devices for management (CreateSpec.OpenDevice); taken
	// (CreateSpec.Taken) refuses a new device of an array kept elsewhere.
	open  OpenDevice
	taken func(uuid string, member *[16]byte) error
	// Background jobs (nil for raid0): the barrier user writes pass and
	// the syncer; checkpoint is each rebuilding role's durable position
	// (under mu); lastRequests is the busy detector's last count.
	barrier     *engine.Barrier
	xbar        *exclusiveBarrier // the raising side, shared by syncer and repairs
	syncBounce  *bouncePool       // the syncer's bounce buffers, unmapped at Close
	repairs     chan repairReq
	stopRepairs func()
	readRepairs atomic.Uint64
	// readErrs counts each role's failed member reads (queue threads);
	// readErrCounts is the repair worker's budget of them.
	readErrs      [engine.MaxMembers]atomic.Uint64
	readErrCounts [engine.MaxMembers]readErrCount
	logCPs        atomic.Uint64  // write-hole log checkpoints written (metrics)
	repairPar     *engine.Parity // raid5/6 read repair's (its worker's only)
	sync          *syncer
	checkpoint    map[int]uint64
	lastRequests  uint64
	bitmapWait    metrics.Histogram // how long writes waited for the bitmap
	// bitmapBlockWrites counts bitmap block writes that reached a member.
	bitmapBlockWrites atomic.Uint64
	// memberOps counts, per role, the member operations the queues do
	// not issue: the background jobs' (rebuild, resync, check, repair)
	// and the bitmap's block writes and flushes. Added to the queues'
	// counters by Metrics.
	memberOps []atomic.Pointer[memberCounters]
	// current device of each role as queue threads see it (a replaced
	// member is not in the queues' fixed-file tables): a new roleDevice
	// each time a device takes the role (publishFile).
	current [engine.RoleTableSize]atomic.Pointer[roleDevice]
	// filesEpoch counts publishFile calls queues must bring into their
	// fixed-file tables (see swapFile).
	filesEpoch atomic.Uint64
	notify     chan struct{} // bitmap.Options.Notify's signal to the flusher
	// unmarked: members failed by hand whose failure was not recorded
	// (Fail's update failed), by role, for the retried fail. Under mu.
	unmarked map[int]failMark
	qmu      sync.Mutex
	queues   map[int]*queue // by queue ID, for the flusher to wake
	// stripeLock orders the requests of a raid5/6 array's queues on its
	// stripes (nil for other levels); made with the first queue, under qmu.
	stripeLock *engine.StripeLock
	// syncWake wakes parity sync work waiting for the stripe lock.
	syncWake chan struct{}

	dataOffset uint64 // bytes
	logOffset  uint64 // bytes: a raid5/6 member's write-hole log area (0: none)
	logBytes   uint64
	logUUID    [16]byte
	// logNext: the write-hole log's first entry number (past every
	// entry on the members: recovery's); logQueues: the queues to give
	// rings (SetQueueCount; 0: ublk's default most); plog: the log at
	// run time, made with the first queue.
	logNext   uint64
	logQueues int
	plogMu    sync.Mutex
	plog      *parityLog
	// logCheckpointEvery: how often the write-hole log's checkpointer
	// looks for a checkpoint to persist unasked (0: every second).
	logCheckpointEvery time.Duration
	// paritySerialBuffers: each raid5/6 queue serves the requests that
	// need a stripe buffer one at a time
	// (engine.ParityExecutor.SerializeBuffers; tests of the waits).
	paritySerialBuffers bool
	// logHeaderMu orders the log header writes at run time; logHeaderCP
	// is the last checkpoint they persisted.
	logHeaderMu sync.Mutex
	logHeaderCP uint64
	// logHold (set at assembly, before the queues) and logHeld (until
	// the next superblock write): see holdLog.
	logHold   bool
	logHeld   atomic.Bool
	mu        sync.Mutex
	durable   atomic.Uint64 // highest engine state generation on disk
	events    uint64        // superblock events of the last write
	unusedGen uint64        // a generation only the bitmap header took: the next update's (see writeSuperblocks)
	stateGen  uint64        // engine generation the last superblock write recorded
	reported  []bool        // roles whose failure was reported to OnMemberFailed
	leaked    []*Member     // swapped out but possibly still in a queue's ring
	answering []*Member     // swapped out with given-up I/O out (closeWhenAnswered)
	spares    []spareMember
	// activating: the spare being put into a role (out of spares, not
	// yet in Members).
	activating *Member
	closing    bool       // Close has begun: no spare is activated
	stopped    bool       // marked clean (SetClean(true)), until SetClean(false): no spare is activated
	closed     bool       // Close took the flusher: no superblock write any more
	spareMu    sync.Mutex // serialises spare activations
	// createUndo: the members (and spares) of a new array whose creation
	// may still be undone (until KeepCreated); undoOnClose: Close writes
	// back what the creation overwrote (CloseUndoCreated), undoErr says
	// how that went.
	createUndo  []*Member
	undoOnClose bool
	undoErr     error
	// spareLater: a spare was due while the creation could still be
	// undone; KeepCreated activates it.
	spareLater bool
}

// Open opens the members and either assembles the array their superblocks
// describe or, when none carries a superblock and create is set, creates a
// new one with spec. Bad input (member missing, too small, in use, of another array,
// mismatched block sizes, geometry errors) is reported before anything is
// written.
func Open(paths []string, spec CreateSpec, create bool) (*Array, error) {
	if len(paths) == 0 {
		return nil, errors.New("no members given")
	}
	if create {
		if err := refuseParity(spec, spec.Level, "the new array"); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, p := range append(append([]string(nil), paths...), spec.Spares...) {
		if seen[p] {
			return nil, fmt.Errorf("member %s is given twice", p)
		}
		seen[p] = true
	}
	for _, w := range spec.WriteMostly {
		if !slices.Contains(paths, w) {
			return nil, fmt.Errorf("write-mostly %s: not one of the members", w)
		}
	}
	var ms []*Member
	closeAll := func() {
		for _, m := range ms {
			m.Close()
		}
	}
	var absentPaths, foreignWarnings []string
	for _, p := range paths {
		m, err := openMember(spec.OpenDevice, p)
		if err != nil && spec.SkipAbsent && !create && absent(err) {
			absentPaths = append(absentPaths, p)
			continue
		}
		if err != nil && spec.SkipAbsent && spec.UUID != "" && !create && errors.Is(err, unix.EBUSY) && heldByOther(spec, p) {
			// A restart: a listed device another array holds (a failed
			// disk's slot reused for another array) is left out as one
			// holding no superblock of this array (below); checkAbsent
			// still refuses if its role is recorded active. One of this
			// array (held by a server that is exiting) is not: its
			// EBUSY lets the caller wait for it (the daemon's openRetry).
			foreignWarnings = append(foreignWarnings, fmt.Sprintf("%s left out: it holds no superblock of array %s, and %v", p, spec.UUID, err))
			absentPaths = append(absentPaths, p)
			continue
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no member is present (%s): %w", strings.Join(absentPaths, ", "), ErrMemberAbsent)
	}
	for _, m := range ms[1:] {
		if m.LogicalBlock != ms[0].LogicalBlock {
			closeAll()
			return nil, fmt.Errorf("members have different logical block sizes: %s %d bytes, %s %d bytes",
				ms[0].Path, ms[0].LogicalBlock, m.Path, m.LogicalBlock)
		}
	}
	var inputs []engine.MemberSB
	for _, m := range ms {
		inputs = append(inputs, readSB(m))
	}
	if spec.SkipAbsent && spec.UUID != "" && !create {
		// A restart: a device at a listed path that holds no superblock
		// of this array (blank, another array's, unreadable or corrupt)
		// is no longer that member (a failed disk swapped for a new one
		// under the same name, or one whose reads fail): left out as an
		// absent one, as md's assembly by UUID ignores it; checkAbsent
		// still refuses if the freshest superblock present records its
		// role active.
		var keepM []*Member
		var keepIn []engine.MemberSB
		for i, in := range inputs {
			if in.SB != nil && engine.UUIDString(in.SB.ArrayUUID) == spec.UUID {
				keepM, keepIn = append(keepM, ms[i]), append(keepIn, in)
				continue
			}
			why := "it holds another array"
			if in.SB == nil {
				why = in.Err.Error()
			}
			foreignWarnings = append(foreignWarnings, fmt.Sprintf("%s left out: not a member of array %s any more (%s)", ms[i].Path, spec.UUID, why))
			absentPaths = append(absentPaths, ms[i].Path)
			ms[i].Close()
		}
		ms, inputs = keepM, keepIn
		if len(ms) == 0 {
			return nil, fmt.Errorf("no member of array %s is present (%s): %w", spec.UUID, strings.Join(absentPaths, ", "), ErrMemberAbsent)
		}
	}
	// Spares: opened now (bad input fails before anything is written);
	// those with a superblock join the assembly, blank ones are added.
	var spares, blank []*Member
	closeSpares := func() {
		for _, m := range spares {
			m.Close()
		}
	}
	for _, p := range spec.Spares {
		m, err := openMember(spec.OpenDevice, p)
		if err != nil && spec.SkipAbsent && !create && absent(err) {
			absentPaths = append(absentPaths, p)
			continue
		}
		if err != nil {
			closeAll()
			closeSpares()
			return nil, err
		}
		spares = append(spares, m)
	}
	var spareIn []engine.MemberSB
	var withSB []*Member
	for _, m := range spares {
		in := readSB(m)
		if in.SB == nil {
			blank = append(blank, m)
		} else {
			spareIn = append(spareIn, in)
			withSB = append(withSB, m)
		}
	}
	if u, ok := oneArray(inputs); ok {
		// The members make one array: a spare carrying another array's
		// superblock is that spare's problem alone, never a reason to
		// take the members for foreign (and, with --level --force, to
		// create a new array over them).
		var keepIn []engine.MemberSB
		var keepM []*Member
		for i, in := range spareIn {
			if in.SB.ArrayUUID == u {
				keepIn, keepM = append(keepIn, in), append(keepM, withSB[i])
				continue
			}
			if !spec.Force {
				closeAll()
				closeSpares()
				return nil, fmt.Errorf("spare %s belongs to array %s (name %q), not %s like the members: leave it out, or --force overwrites it as a blank spare",
					in.Path, engine.UUIDString(in.SB.ArrayUUID), in.SB.Name, engine.UUIDString(u))
			}
			blank = append(blank, withSB[i])
		}
		spareIn, withSB = keepIn, keepM
	}
	asm, err := engine.AssembleWith(append(append([]engine.MemberSB(nil), inputs...), spareIn...),
		engine.AssembleOptions{Force: spec.Force})
	if err == nil && create && spec.Level >= 0 && !slices.ContainsFunc(inputs, func(in engine.MemberSB) bool { return in.SB == nil || !in.SB.IsSpare() }) {
		// Only spares of one array given, with a level: no array to
		// assemble (they hold no data), devices to create one over, as
		// a spare given with a blank device is (foreign, below).
		var names []string
		for _, in := range inputs {
			names = append(names, in.Path)
		}
		err = fmt.Errorf("%w: %s are spares of array %s (name %q), holding no data", engine.ErrNotMember, strings.Join(names, ", "), engine.UUIDString(asm.UUID), asm.Name)
	}
	// Devices carrying superblocks that make no one array (of other
	// arrays, some blank, damaged) are no array to assemble: with a level
	// and force a new one is created over them, as mdadm --create --run.
	foreign := errors.Is(err, engine.ErrNotMember) || errors.Is(err, engine.ErrMixedArrays) || errors.Is(err, engine.ErrCorruptSuperblock)
	if foreign && create && spec.Level >= 0 && !spec.Force {
		closeAll()
		closeSpares()
		return nil, fmt.Errorf("%w; %w (with --level, a new array over them)", err, ErrSignature)
	}
	if errors.Is(err, engine.ErrNoSuperblock) || (foreign && create && spec.Level >= 0 && spec.Force) {
		if !create {
			closeAll()
			closeSpares()
			return nil, fmt.Errorf("the members carry no ublk-raid superblock: give --level to create a new array")
		}
		if len(spareIn) > 0 && !spec.Force {
			closeAll()
			closeSpares()
			return nil, fmt.Errorf("spare %s carries a ublk-raid superblock: wipe it first if it is free", spareIn[0].Path)
		}
		// Nor over a member of an array the caller keeps (the daemon's,
		// served or waiting in its state file), forced or not.
		if spec.Taken != nil {
			for _, in := range append(append([]engine.MemberSB(nil), inputs...), spareIn...) {
				if in.SB == nil {
					continue
				}
				if err := spec.Taken(engine.UUIDString(in.SB.ArrayUUID), &in.SB.MemberUUID); err != nil {
					closeAll()
					closeSpares()
					return nil, fmt.Errorf("%s: %w", in.Path, err)
				}
			}
		}
		// Nothing is written over a device that holds data, unless forced
		// (then what was found is erased with the superblock writes).
		wipes := map[*Member]signatures{}
		for _, m := range append(append([]*Member(nil), ms...), spares...) {
			sigs, err := checkBlank(m, spec.Force)
			if err != nil {
				closeAll()
				closeSpares()
				return nil, err
			}
			wipes[m] = sigs
		}
		// From the first write on (distinctDevices' probes included,
		// which it puts back itself unless a write fails), what the
		// creation overwrites is kept until the caller keeps the array
		// (its device serves it) or undoes it (CloseUndoCreated).
		all := append(append([]*Member(nil), ms...), spares...)
		beginUndo(all)
		a, err := newArray(ms, spares, spec, wipes)
		if err != nil {
			if uerr := undoWrites(all, undoLateWait); uerr != nil {
				err = fmt.Errorf("%w; %w", err, uerr)
			}
			closeAll()
			closeSpares()
			return nil, err
		}
		a.createUndo = all
		if !spec.Undoable {
			defer a.KeepCreated()
		}
		a.WriteMostly, _ = a.writeMostlyMask(spec.WriteMostly) // every member has a role
		a.open, a.taken = spec.OpenDevice, spec.Taken
		a.initSync(spec)
		a.start()
		return a, nil
	}
	if err == nil && spec.UUID != "" && engine.UUIDString(asm.UUID) != spec.UUID {
		err = fmt.Errorf("the members hold array %s, not %s", engine.UUIDString(asm.UUID), spec.UUID)
	}
	if err == nil && spec.Name != "" && asm.Name != spec.Name {
		// As mdadm --assemble --name: the name selects the array; members
		// of another are not assembled under it (nor "created" over).
		err = fmt.Errorf("the members hold array %q, not %q", asm.Name, spec.Name)
	}
	if err == nil && spec.Taken != nil {
		err = spec.Taken(engine.UUIDString(asm.UUID), nil)
	}
	if err == nil && len(absentPaths) > 0 {
		err = checkAbsent(asm, absentPaths)
	}
	if err == nil && spec.AsRecorded {
		err = checkRecorded(asm)
	}
	if err != nil {
		closeAll()
		closeSpares()
		return nil, err
	}
	if create && spec.Level >= 0 && engine.Level(asm.Level) != spec.Level {
		// Refused here, before a blank spare is written.
		closeAll()
		closeSpares()
		return nil, fmt.Errorf("the members hold a %s array; level %d would create a new one: wipe them first", engine.Level(asm.Level), spec.Level)
	}
	if create && spec.Level >= 0 {
		if what := spec.otherArray(asm, len(paths)); what != "" {
			// The request describes another array than the one the
			// members hold: assembled, the user would get that one in
			// its place (degraded, when given fewer members).
			closeAll()
			closeSpares()
			return nil, fmt.Errorf("the members hold %s array %q; a create with %s would be a new array: wipe them first, or leave out --level to assemble it", engine.Level(asm.Level), asm.Name, what)
		}
	}
	ms = append(ms, withSB...) // in step with inputs
	inputs = append(inputs, spareIn...)
	// A blank spare given at assembly is added once the array is open,
	// after every one of them passed the checks (nothing is written
	// before).
	if len(blank) > 0 {
		// As addSpares checks once the array is open.
		if engine.Level(asm.Level) == engine.Level0 {
			err = errors.New("a raid0 array has no spares")
		} else if n := len(asm.Roles) + len(asm.Spares) + len(blank); n > engine.RoleTableSize {
			err = fmt.Errorf("the role table is full: at most %d members and spares", engine.RoleTableSize)
		}
		if err != nil {
			closeAll()
			closeSpares()
			return nil, err
		}
	}
	for _, m := range blank {
		err := checkBlankSpare(m, ms[0], asm, inputs)
		if err == nil {
			_, err = checkBlank(m, spec.Force)
		}
		if err == nil && spec.Taken != nil {
			// A spare of another array taken as blank (--force): never
			// one of an array the caller keeps, refused before anything
			// is written (addSpares asks again once the array is open).
			if sb, _, rerr := engine.ReadSuperblock(m.ReadBlock, m.Size); rerr == nil && sb.ArrayUUID != asm.UUID {
				if terr := spec.Taken(engine.UUIDString(sb.ArrayUUID), &sb.MemberUUID); terr != nil {
					err = fmt.Errorf("spare %s: %w", m.Path, terr)
				}
			}
		}
		if err != nil {
			closeAll()
			closeSpares()
			return nil, err
		}
	}
	a, err := assemble(ms, inputs, asm, spec)
	if err != nil {
		closeAll()
		for _, m := range blank {
			m.Close()
		}
		return nil, err
	}
	a.Absent = absentPaths
	a.Warnings = append(a.Warnings, foreignWarnings...)
	a.open, a.taken = spec.OpenDevice, spec.Taken
	a.initSync(spec)
	a.start()
	if err := a.addSpares(blank, spec.Force); err != nil {
		// Checked before anything was written (checkBlankSpare,
		// checkBlank): a write failed. The array is assembled and
		// started (its superblocks, a forced assembly's log areas
		// written): refused now, that would not leave the members as
		// they were. md does not add a spare it cannot write either.
		a.Warnings = append(a.Warnings, fmt.Sprintf("spares not added: %v", err))
	}
	return a, nil
}

// oneArray returns the array UUID every member input with a superblock
// carries, if they all carry one and the same.
func oneArray(inputs []engine.MemberSB) (u [16]byte, ok bool) {
	for _, in := range inputs {
		if in.SB == nil {
			return u, false
		}
		if ok && in.SB.ArrayUUID != u {
			return u, false
		}
		u, ok = in.SB.ArrayUUID, true
	}
	return u, ok
}

// checkBlankSpare refuses a blank spare given at assembly that the array
// assembled as asm cannot take (its logical block size, its size: as
// spareSuperblock checks once the array is open), before assembly writes
// anything (a raid5/6 log replay).
func checkBlankSpare(m, member *Member, asm *engine.Assembly, inputs []engine.MemberSB) error {
	if m.LogicalBlock != member.LogicalBlock {
		return fmt.Errorf("%s has %d-byte logical blocks; the array has %d", m.Path, m.LogicalBlock, member.LogicalBlock)
	}
	var sectors uint64
	for _, ra := range asm.Roles {
		if ra.State != engine.RoleActive && ra.State != engine.RoleRebuilding {
			continue
		}
		for _, in := range inputs {
			if in.Path == ra.Path && in.SB != nil && (sectors == 0 || in.SB.DataSectors < sectors) {
				sectors = in.SB.DataSectors
			}
		}
	}
	if need := asm.Freshest.DataOffset + sectors<<9; uint64(m.Size) < need {
		return fmt.Errorf("%s is %d bytes; a spare needs at least %d", m.Path, m.Size, need)
	}
	return nil
}

// writeMostlyMask is the mask of the roles of the members at paths.
func (a *Array) writeMostlyMask(paths []string) (uint64, error) {
	var mask uint64
	for _, p := range paths {
		r := a.RoleOf(p)
		if r < 0 {
			return 0, fmt.Errorf("write-mostly %s: it holds no role in the array (stale, faulty or a spare): leave it out, or re-add it first", p)
		}
		mask |= 1 << uint(r)
	}
	return mask, nil
}

// readSB reads m's superblock for assembly.
func readSB(m *Member) engine.MemberSB {
	in := engine.MemberSB{Path: m.Path}
	if sb, _, err := engine.ReadSuperblock(m.ReadBlock, m.Size); err != nil {
		in.Err = err
	} else if err := sb.CheckMemberSize(uint64(m.Size)); err != nil {
		in.Err = err // bounded by the device before anything trusts it
	} else {
		in.SB = sb
	}
	return in
}

func newArray(ms, spares []*Member, spec CreateSpec, wipes map[*Member]signatures) (*Array, error) {
	if spec.ChunkSectors == 0 {
		spec.ChunkSectors = 1024 // 512 KiB
	}
	sizes := make([]uint64, len(ms))
	minSize := uint64(ms[0].Size)
	lbs, pbs := 512, 512
	for i, m := range ms {
		sizes[i] = uint64(m.Size)
		minSize = min(minSize, sizes[i])
		lbs, pbs = max(lbs, m.LogicalBlock), max(pbs, m.PhysicalBlock)
	}
	aspec := engine.ArraySpec{
		Name: spec.Name, Level: uint32(spec.Level), Layout: spec.Layout.MD(),
		ChunkSectors: uint32(spec.ChunkSectors), MemberBytes: sizes,
	}
	if engine.IsParityLevel(spec.Level) {
		aspec.Layout = uint32(spec.ParityLayout)
		aspec.LogBytes = parityLogBytes(minSize, parityGeometryOf(spec, len(ms)))
		if err := logRingsFit(aspec.LogBytes, parityGeometryOf(spec, len(ms)), spec.Queues, spec.MaxIOBytes); err != nil {
			return nil, err
		}
	}
	for _, m := range ms {
		aspec.MemberNames = append(aspec.MemberNames, m.Path)
	}
	if len(spares) > 0 && spec.Level == engine.Level0 {
		return nil, errors.New("a raid0 array cannot have spares")
	}
	for _, m := range spares {
		if m.LogicalBlock != ms[0].LogicalBlock {
			return nil, fmt.Errorf("spare %s has %d-byte logical blocks; the members have %d", m.Path, m.LogicalBlock, ms[0].LogicalBlock)
		}
		aspec.SpareBytes = append(aspec.SpareBytes, uint64(m.Size))
		aspec.SpareNames = append(aspec.SpareNames, m.Path)
		lbs, pbs = max(lbs, m.LogicalBlock), max(pbs, m.PhysicalBlock)
	}
	if spec.Level == engine.Level10 {
		// The layout sizes the bitmap below: refuse a missing or invalid
		// one here (the zero Layout divides by zero far copies).
		upper := engine.Geometry{Level: spec.Level, Members: len(ms), Layout: spec.Layout,
			ChunkSectors: spec.ChunkSectors, MemberSectors: minSize >> 9 &^ 7}
		if err := upper.Validate(); err != nil {
			return nil, err
		}
	}
	useBitmap := !spec.NoBitmap && spec.Level != engine.Level0
	bs := bitmap.BlockSizeFor(uint32(lbs), uint32(pbs), 0)
	var region uint64
	if useBitmap {
		// Sized for the largest array these members could make (no data
		// offset), so the real, slightly smaller array always fits.
		var err error
		region, aspec.BitmapBytes, err = bitmapArea(maxArraySectors(spec, len(ms), minSize>>9&^7), spec.RegionSectors, bs)
		if err != nil {
			return nil, err
		}
	}
	sbs, err := engine.NewSuperblocks(aspec)
	if err != nil {
		return nil, err
	}
	g := geometryOf(sbs[0], sbs)
	ea, err := engineArray(sbs[0], sbs)
	if err != nil {
		return nil, err
	}
	n := len(ms)
	a := &Array{Engine: ea, Members: ms, SBs: sbs[:n:n], Created: true, dataOffset: sbs[0].DataOffset, logOffset: sbs[0].LogOffset, events: sbs[0].Events,
		logBytes: sbs[0].LogBytes, logUUID: sbs[0].ArrayUUID, logNext: 1}
	if w := unusedWarning(ms, sbs[0].DataOffset+g.MemberSectors<<9); w != "" {
		a.Warnings = append(a.Warnings, w)
	}
	if useBitmap {
		cfg := bitmapConfig(sbs[0], arraySectors(ea))
		cfg.RegionSectors, cfg.BlockSize = region, bs
		init := bitmap.InitNeverWritten
		if spec.AssumeClean {
			init = bitmap.InitClean
		}
		a.Bitmap, err = bitmap.Create(cfg, init, a.bitmapOptions(spec.BitmapOptions))
		if err != nil {
			return nil, fmt.Errorf("write-intent bitmap: %w", err)
		}
	}
	// Spares must hold the array's data area.
	for i, m := range spares {
		if sb := sbs[n+i]; sb.DataSectors < g.MemberSectors {
			return nil, fmt.Errorf("spare %s is %d bytes; it needs at least %d", m.Path, m.Size, sb.DataOffset+g.MemberSectors<<9)
		}
	}
	// Nor may two of them be one storage (two nodes of one disk): one
	// role's writes would land on another's.
	if err := distinctDevices(append(append([]*Member(nil), ms...), spares...)); err != nil {
		return nil, err
	}
	// Everything is checked; now, and only now, write.
	for i, m := range append(append([]*Member(nil), ms...), spares...) {
		if err := wipeSignatures(m, wipes[m]); err != nil {
			return nil, err
		}
		b, err := sbs[i].MarshalBinary()
		if err != nil {
			return nil, err
		}
		if err := writeSB(m, b); err != nil {
			return nil, err
		}
	}
	if sb := sbs[0]; sb.LogBytes > 0 {
		// The write-hole log areas: a header with the first checkpoint
		// (the entries there, of no array or another, are not this
		// one's: nothing to zero).
		b := make([]byte, engine.ParityLogHeaderSize)
		h := engine.ParityLogHeader{Array: sb.ArrayUUID, Checkpoint: 1}
		if err := h.Encode(b); err != nil {
			return nil, err
		}
		for _, m := range append(append([]*Member(nil), ms...), spares...) {
			if err := m.WriteBlockSync(int64(sb.LogOffset), b); err != nil {
				return nil, fmt.Errorf("%s: write-hole log header: %w", m.Path, err)
			}
		}
	}
	for i, m := range spares {
		a.spares = append(a.spares, spareMember{m: m, uuid: sbs[n+i].MemberUUID})
	}
	a.stateGen = ea.State().Gen
	a.durable.Store(a.stateGen)
	return a, nil
}

// otherArray says how a create of spec with members members differs from
// the array asm the members hold (its level is spec's): another member
// count, or a layout or chunk size that was given and differs ("" when
// none does).
func (spec CreateSpec) otherArray(asm *engine.Assembly, members int) string {
	switch {
	case members != asm.Members:
		return fmt.Sprintf("%d members (it has %d)", members, asm.Members)
	case spec.LayoutGiven && engine.IsParityLevel(spec.Level) && uint32(spec.ParityLayout) != asm.Layout:
		return fmt.Sprintf("layout %v (it has %v)", spec.ParityLayout, engine.ParityLayout(asm.Layout))
	case spec.LayoutGiven && spec.Level == engine.Level10 && spec.Layout.MD() != asm.Layout:
		l, _ := engine.LayoutFromMD(asm.Layout)
		return fmt.Sprintf("layout %v (it has %v)", spec.Layout, l)
	case spec.ChunkGiven && uint64(asm.ChunkSectors) != spec.ChunkSectors:
		return fmt.Sprintf("chunk %d KiB (it has %d KiB)", spec.ChunkSectors/2, asm.ChunkSectors/2)
	}
	return ""
}

// unusedWarning says, like mdadm, when the largest member exceeds what
// the array uses of each member (used bytes) by more than 1%.
func unusedWarning(ms []*Member, used uint64) string {
	big := ms[0]
	for _, m := range ms {
		if m.Size > big.Size {
			big = m
		}
	}
	size := uint64(big.Size)
	if size*100 <= used*101 {
		return ""
	}
	return fmt.Sprintf("largest member %s is %d bytes; the array uses %d bytes of each member, leaving %d bytes (%d%%) of it unused",
		big.Path, size, used, size-used, (size-used)*100/size)
}

// geometryOf is the engine geometry a superblock describes, with the
// smallest member data size among sbs.
func geometryOf(sb *engine.Superblock, sbs []*engine.Superblock) engine.Geometry {
	g := engine.Geometry{Level: engine.Level(sb.Level), Members: int(sb.Members), ChunkSectors: uint64(sb.ChunkSectors)}
	if g.Level == engine.Level10 {
		g.Layout, _ = engine.LayoutFromMD(sb.Layout)
	}
	for _, s := range sbs {
		if s != nil && !s.IsSpare() && (g.MemberSectors == 0 || s.DataSectors < g.MemberSectors) {
			g.MemberSectors = s.DataSectors
		}
	}
	return g
}

func assemble(ms []*Member, inputs []engine.MemberSB, asm *engine.Assembly, spec CreateSpec) (*Array, error) {
	opts := spec.BitmapOptions
	if err := refuseParity(spec, engine.Level(asm.Level), fmt.Sprintf("array %q", asm.Name)); err != nil {
		return nil, err
	}
	if asm.Failed {
		return nil, fmt.Errorf("array %q cannot be assembled: %d of %d members active", asm.Name, asm.ActiveRoles, asm.Members)
	}
	byPath := map[string]int{}
	for i, in := range inputs {
		byPath[in.Path] = i
	}
	roles := make([]*Member, asm.Members)
	sbs := make([]*engine.Superblock, asm.Members)
	states := make([]engine.MemberStatus, asm.Members)
	var used []bool = make([]bool, len(ms))
	for r, ra := range asm.Roles {
		switch ra.State {
		case engine.RoleActive, engine.RoleRebuilding:
			i := byPath[ra.Path]
			roles[r], sbs[r], used[i] = ms[i], inputs[i].SB, true
			if ra.Forced || ra.Promoted {
				// Not trusted by the freshest table: it takes its role
				// at the freshest generation and is rebuilt in full
				// (Forced), or is in sync as it is (Promoted: the array
				// cannot start without it).
				own := inputs[i].SB
				if own.DataOffset != asm.Freshest.DataOffset {
					return nil, fmt.Errorf("member %s has its data at byte %d, the array at %d: it cannot be rebuilt in place", ms[i].Path, own.DataOffset, asm.Freshest.DataOffset)
				}
				// It takes the array's data size (checked against its
				// device below), not its own record: that may predate
				// a grow it missed, and the smallest data size of the
				// members is the array's.
				sb := *asm.Freshest
				sb.Role, sb.MemberUUID = uint32(r), own.MemberUUID
				if ra.Promoted {
					// Its own generation, as on its device, so that
					// superblock updates take it as behind: it is
					// written before the members ahead, and an update
					// it fails (it holds the last copy of some data)
					// stops before they take a generation it lacks,
					// which would leave it beyond assembly's slack
					// (stale again, --force needed again) even after
					// a torn update. (A member rebuilt in full, Forced,
					// is never the last copy: an update it fails fails
					// it, and it is rebuilt in full again.)
					sb.Events = own.Events
				}
				sbs[r] = &sb
			}
			if ra.State == engine.RoleRebuilding {
				states[r] = engine.MemberStatus{State: engine.MemberRebuilding, RebuildOffset: ra.RecoveryOffset}
			}
		case engine.RoleFaulty:
			states[r] = engine.MemberStatus{State: engine.MemberFaulty}
		default:
			states[r] = engine.MemberStatus{State: engine.MemberMissing}
		}
	}
	isSpare := map[string]bool{}
	for _, p := range asm.Spares {
		isSpare[p] = true
	}
	// One data offset and one bitmap area (the freshest superblock's)
	// serve every member: a member whose own superblock says otherwise
	// would be read and written where its data is not, or past its end.
	ref := asm.Freshest
	for i, in := range inputs {
		if sb := in.SB; (used[i] || isSpare[in.Path]) &&
			(sb.DataOffset != ref.DataOffset || sb.BitmapOffset != ref.BitmapOffset || sb.BitmapBytes != ref.BitmapBytes ||
				sb.LogOffset != ref.LogOffset || sb.LogBytes != ref.LogBytes) {
			return nil, fmt.Errorf("member %s: its superblock puts the data at byte %d, the bitmap area at byte %d (%d bytes) and the write-hole log at byte %d (%d bytes), the array's are at byte %d, %d (%d bytes) and %d (%d bytes): corrupt or crafted superblock (leave it out to assemble the array without it)",
				in.Path, sb.DataOffset, sb.BitmapOffset, sb.BitmapBytes, sb.LogOffset, sb.LogBytes, ref.DataOffset, ref.BitmapOffset, ref.BitmapBytes, ref.LogOffset, ref.LogBytes)
		}
	}
	var spares []spareMember
	for i, m := range ms {
		switch {
		case used[i]:
		case isSpare[m.Path] && asm.Level != 0:
			spares = append(spares, spareMember{m: m, uuid: inputs[i].SB.MemberUUID})
		default:
			m.Close() // stale: re-add or replace brings it back
		}
	}
	g := geometryOf(asm.Freshest, sbs)
	// A spare of this array that cannot hold a member's data area (a
	// grow since it was last given, or another logical block size) is
	// left out, as md does not bind a device smaller than the array's
	// members: activated, it would be refused, leaving the array
	// degraded with an idle spare.
	var spareWarnings []string
	kept := spares[:0]
	for _, sp := range spares {
		// (The checks a blank spare given at assembly passes.)
		if err := checkBlankSpare(sp.m, ms[0], asm, inputs); err != nil {
			spareWarnings = append(spareWarnings, fmt.Sprintf("spare left out: %v", err))
			sp.m.Close()
			continue
		}
		kept = append(kept, sp)
	}
	spares = kept
	for r, ra := range asm.Roles {
		if m := roles[r]; (ra.Forced || ra.Promoted) && m != nil {
			if need := asm.Freshest.DataOffset + g.MemberSectors<<9; uint64(m.Size) < need {
				return nil, fmt.Errorf("member %s is %d bytes; the array needs %d of it: it cannot be rebuilt in place (leave it out to assemble the array without it)", m.Path, m.Size, need)
			}
		}
	}
	// Every member records the array's data area from now on: a member
	// recording more (a grow whose superblock update was cut after some
	// members took it) would keep that size through later updates, and
	// bring the array up grown when assembled without the others.
	for _, sb := range sbs {
		if sb != nil {
			sb.DataSectors = g.MemberSectors
		}
	}
	for r, m := range states {
		if m.State == engine.MemberRebuilding && m.RebuildOffset > g.MemberSectors {
			// Bounded by the data size of the superblock it came from,
			// which may exceed the array's (the smallest): past the end
			// it says nothing trustworthy. Rebuilt from the start.
			states[r].RebuildOffset = 0
		}
	}
	ea, err := engineArray(asm.Freshest, sbs)
	if err != nil {
		return nil, err
	}
	st := ea.SetState(states)
	a := &Array{Engine: ea, Members: roles, SBs: sbs, dataOffset: asm.Freshest.DataOffset, logOffset: asm.Freshest.LogOffset, events: asm.Events, spares: spares,
		logBytes: asm.Freshest.LogBytes, logUUID: asm.Freshest.ArrayUUID, logNext: 1,
		checkpoint: map[int]uint64{}, Warnings: spareWarnings}
	for r, m := range states {
		if m.State == engine.MemberRebuilding {
			a.checkpoint[r] = m.RebuildOffset // durable: from the superblocks
		}
	}
	a.stateGen = st.Gen
	a.durable.Store(st.Gen)
	if ea.Parity != nil && a.logBytes > 0 {
		if err := logRingsFit(a.logBytes, *ea.Parity, spec.Queues, spec.MaxIOBytes); err != nil {
			return nil, err
		}
	}
	if ea.Parity != nil && !parityCovered(ea) || ea.Parity == nil && !geometryCovered(ea) {
		return nil, fmt.Errorf("array %q cannot be assembled: the active members do not hold a copy of every chunk", asm.Name)
	}
	// A raid10 member put in sync as it is holds chunks beside members
	// in sync (engine's forceUp puts one in sync only for a chunk no
	// member in sync holds, but its others are shared) that missed the
	// writes made since it left. The bitmap's dirty regions record them
	// only if it cleared none since (events_cleared, as for a re-add);
	// without a bitmap nothing records them: the copies are made one by a
	// resync of every region, as after an unclean stop, rather than leave
	// reads alternating between the two versions.
	var promotedEvents uint64 = math.MaxUint64
	if g.Level == engine.Level10 {
		for _, ra := range asm.Roles {
			if ra.Promoted {
				promotedEvents = min(promotedEvents, ra.PromotedEvents)
			}
		}
	}
	a.promotedStale = promotedEvents != math.MaxUint64 && asm.Freshest.BitmapBytes == 0
	if fsb := asm.Freshest; fsb.BitmapBytes != 0 && g.Level != engine.Level0 {
		forced := make([]bool, len(roles))
		for r, ra := range asm.Roles {
			forced[r] = ra.Forced || ra.Promoted
		}
		if err := a.loadBitmap(fsb, roles, states, forced, opts); err != nil {
			return nil, err
		}
		if promotedEvents < a.Bitmap.EventsCleared() && !a.BitmapInfo.AllDirty {
			if err := a.allDirtyBitmap(fsb, opts, fmt.Errorf("a member put in sync by --force left at events %d, before the bitmap last cleared regions (events %d): every region is resynced", promotedEvents, a.Bitmap.EventsCleared())); err != nil {
				return nil, err
			}
		}
		if h := a.Bitmap.Events(); h == a.events+1 {
			// A generation only the bitmap header took (an update no
			// superblock took, then a stop): the next update takes it
			// again, as within a run (see unusedGen). Moving on to h+1
			// instead, an update torn between two members each holding
			// the last copy of some data (raid10) leaves them two
			// generations apart, beyond assembly's slack.
			a.unusedGen = h
		}
	}
	// The next state change writes events+1 (or the bitmap's events+1, if
	// higher): refuse now, before anything is written, if that would wrap.
	events, where := a.events, "the superblock"
	for _, in := range inputs {
		if in.SB.Events == events {
			where = "the superblock of " + in.Path
			break
		}
	}
	if a.Bitmap != nil && a.Bitmap.Events() > events {
		events, where = a.Bitmap.Events(), "the write-intent bitmap header"
	}
	if events >= engine.MaxEvents {
		return nil, fmt.Errorf("array %q cannot be assembled: the events counter in %s is %d, the maximum %d: the next update would wrap (corrupt or crafted metadata)",
			asm.Name, where, events, uint64(engine.MaxEvents))
	}
	// Before anything is written (a log replay, blank spares, the bitmap).
	if a.WriteMostly, err = a.writeMostlyMask(spec.WriteMostly); err != nil {
		return nil, err
	}
	if ea.Parity != nil {
		// Everything is checked: the write-hole log is replayed before
		// anything reads the parity or writes.
		replayed, left, err := a.recoverParityLog(asm)
		if err != nil {
			return nil, fmt.Errorf("array %q: write-hole log: %w", asm.Name, err)
		}
		// A member put in sync as it is (Promoted) holds entries from
		// before it left the array, numbered below or among the ones
		// written since: not read (recoverParityLog), and emptied now,
		// after the replay, which can still refuse the assembly (a
		// refusal leaves it as it was), so that a later assembly does
		// not replay them over stripes written since. Until the first
		// superblock update, after this, its own superblock keeps its
		// old generation and the others' record it out: a crash before
		// then leaves it stale, its area unread. It cannot be failed
		// (the array needs it): an error refuses the assembly.
		for r, ra := range asm.Roles {
			if m := a.Members[r]; ra.Promoted && m != nil {
				if err := a.resetLogArea(m); err != nil {
					return nil, fmt.Errorf("array %q: %w", asm.Name, err)
				}
			}
		}
		// A member a forced assembly put back holds the other side's
		// entries (split brain), numbered as this array's: replayed at a
		// later assembly, they would put back parity of writes this side
		// never made. Its area is emptied, as a new device's; one that
		// cannot be is failed, as the replay fails a member it cannot
		// write (a rebuild target: the assembly goes on without it,
		// rather than refuse after it emptied another's).
		for r, ra := range asm.Roles {
			if m := a.Members[r]; ra.Forced && m != nil {
				if err := a.resetLogArea(m); err != nil {
					if st, _, _ := a.Engine.FailRedundant(r); st.Members[r].State != engine.MemberFaulty {
						return nil, fmt.Errorf("array %q: %w", asm.Name, err)
					}
					a.Warnings = append(a.Warnings, fmt.Sprintf("%s failed: %v", m.Path, err))
				}
			}
		}
		if replayed+left > 0 {
			a.Warnings = append(a.Warnings, fmt.Sprintf("write-hole log: the parity of %d interrupted writes recomputed, %d left (a member they need is missing)", replayed, left))
		}
		if asm.DirtyDegraded {
			a.Warnings = append(a.Warnings, fmt.Sprintf("started dirty and degraded (%d of %d roles not in sync): the write-hole log replayed every interrupted write, so no force was needed",
				asm.Members-asm.ActiveRoles, asm.Members))
		}
	}
	for r, ra := range asm.Roles {
		if ra.Promoted {
			// As mdadm --force says it.
			a.Warnings = append(a.Warnings, fmt.Sprintf("forcing event count in %s(%d) from %d up to %d: the writes it missed are lost",
				ra.Path, r, ra.PromotedEvents, asm.Events))
		}
	}
	return a, nil
}

// loadBitmap reads the bitmap copies of the in-sync and rebuilding
// members and loads them; an untrustworthy bitmap gives every region
// dirty (BitmapInfo says why). Members not in sync are missing for the
// bitmap. A member a forced assembly put back (forced) is left out: its
// copy is the other side's history (split brain), and where the kept
// side's copy is torn it would answer for it, so that a region the kept
// side wrote reads never written and its forced rebuild skips it. So is
// one it put in sync as it is (Promoted, also in forced): its copy is
// from before it left, and the kept side's copies record the regions
// written since, where its data differs.
func (a *Array) loadBitmap(fsb *engine.Superblock, roles []*Member, states []engine.MemberStatus, forced []bool, opts bitmap.Options) error {
	cfg := bitmapConfig(fsb, arraySectors(a.Engine))
	cfg.Events = a.events
	copies := make([][]byte, len(roles))
	bs := 0
	for r, m := range roles {
		// Rebuilding members' copies too: they take every batch, and a
		// write below a rebuild's position reaches them (a region the
		// in-sync copies failed to take dirty, a write the last copy
		// failed while the rebuilding one took it, must come back dirty).
		// A copy can only add caution: each region merges to its most
		// cautious state among the copies used.
		if m == nil || !writable(states[r]) || forced[r] {
			continue
		}
		bs = max(bs, m.LogicalBlock, m.PhysicalBlock)
		// No copy spans more than MaxCopyBytes of the area.
		b, err := m.ReadBlock(int64(fsb.BitmapOffset), int(min(fsb.BitmapBytes, bitmap.MaxCopyBytes)))
		if err == nil {
			copies[r] = b
		}
	}
	cfg.BlockSize = bs
	bm, info, err := bitmap.Assemble(cfg, copies, a.bitmapOptions(opts))
	if err != nil {
		return fmt.Errorf("write-intent bitmap: %w", err)
	}
	for r, st := range states {
		if st.State != engine.MemberActive {
			bm.SetMissing(r, true)
		}
	}
	a.Bitmap, a.BitmapInfo = bm, info
	return nil
}

// allDirtyBitmap replaces the bitmap loadBitmap loaded by one with every
// region dirty, in its geometry and above its events, for why.
func (a *Array) allDirtyBitmap(fsb *engine.Superblock, opts bitmap.Options, why error) error {
	cfg := bitmapConfig(fsb, arraySectors(a.Engine))
	g := a.Bitmap.Geometry()
	cfg.RegionSectors, cfg.BlockSize = g.RegionSectors, g.BlockSize
	cfg.Events = max(a.events, a.Bitmap.Events())
	bm, err := bitmap.AllDirty(cfg, a.bitmapOptions(opts))
	if err != nil {
		return fmt.Errorf("write-intent bitmap: %w", err)
	}
	for r, st := range a.Engine.State().Members {
		if st.State != engine.MemberActive {
			bm.SetMissing(r, true)
		}
	}
	a.Bitmap = bm
	a.BitmapInfo.AllDirty, a.BitmapInfo.Err = true, why
	return nil
}

// geometryCovered reports whether every chunk has a readable copy.
func geometryCovered(ea *engine.Array) bool {
	if ea.Parity != nil {
		return parityCovered(ea)
	}
	st := ea.State()
	return ea.Geo.EveryChunk(func(copies []engine.Location) bool {
		for _, l := range copies {
			if st.Members[l.Member].State == engine.MemberActive {
				return true
			}
		}
		return false
	})
}

// SetClean records in every member's superblock whether the array is
// stopped cleanly (true) or in use (false).
//
// Marked clean, the array activates no spare until it is marked in use
// again: an activation (a member failed by the stop's flush, below, or
// one under way) would write a generation in use over the clean mark.
func (a *Array) SetClean(clean bool) error {
	if clean {
		a.mu.Lock()
		a.stopped = true
		a.mu.Unlock()
		a.spareMu.Lock() // an activation under way finishes first
		a.spareMu.Unlock()
		a.failUnflushed()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !clean {
		a.stopped = false
	}
	return a.writeSuperblocks(a.Engine.State(), clean)
}

// failUnflushed flushes every member in use before a clean mark and
// fails each whose flush fails, as md fails a member whose superblock
// write's PREFLUSH fails: it may have lost writes it acknowledged, so its
// copy is not in sync, and the others are marked clean without it. Never
// the last copy of something (FailRedundantIf): then writeSuperblocks,
// which flushes again, refuses the mark.
func (a *Array) failUnflushed() {
	a.mu.Lock()
	st := a.Engine.State()
	members := append([]*Member(nil), a.Members...)
	var roles []int
	for r, m := range members {
		if m != nil && writable(st.Members[r]) {
			roles = append(roles, r)
		}
	}
	a.mu.Unlock()
	errs := writeAll(members, roles, a.MemberTimeout, func(r int) error { return memberSync(members[r]) })
	for _, r := range roles {
		if errs[r] == nil {
			continue
		}
		if nst, changed, _, _ := a.Engine.FailRedundantIf(r, st.Members[r].Since); changed {
			a.persist(nst)
		}
	}
}

// persist makes engine state st durable (Backend.Persist): called from
// queue threads; serialised; a generation already on disk is not written
// again.
func (a *Array) persist(st *engine.ArrayState) error {
	if a.durable.Load() < st.Gen {
		a.checkpointLog()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.durable.Load() >= st.Gen {
		return nil
	}
	if a.closed {
		return errors.New("the array is closed")
	}
	st = a.Engine.State() // the newest, which covers st
	return a.writeSuperblocks(st, false)
}

// failedSince reports whether a role writable in st is no longer in cur.
func failedSince(st, cur *engine.ArrayState) bool {
	for r := range st.Members {
		if r < len(cur.Members) && writable(st.Members[r]) && !writable(cur.Members[r]) {
			return true
		}
	}
	return false
}

// pick is the errors of the roles tried.
func pick(errs []error, tried []bool) []error {
	var out []error
	for r, t := range tried {
		if t {
			out = append(out, errs[r])
		}
	}
	return out
}

// writeSuperblocks writes the next generation of superblocks, with role
// states from st, to every member still in use. Called with a.mu held.
func (a *Array) writeSuperblocks(st *engine.ArrayState, clean bool) error {
	if a.events >= engine.MaxEvents {
		return fmt.Errorf("events counter %d is at its maximum: the update would wrap it; nothing written", a.events)
	}
	// The new generation: above the superblocks' and the bitmap header's
	// (which may be ahead after assembly), unless it is the header's own
	// that no superblock took (below). Only this writer, under a.mu,
	// moves the header's, so the flusher makes exactly this one durable.
	//
	// An update that no superblock took leaves its generation in the
	// header alone: the next one takes that generation again. Were each
	// such update to move on, a last copy failing its superblock writes
	// would leave the members that took the update before it one
	// generation ahead, and the next update (which the members behind
	// take first) torn by a power cut would leave them as many
	// generations apart as updates failed, beyond assembly's slack.
	ev := a.events + 1
	same := false
	if a.fl != nil {
		a.fl.do(func() {
			if h := a.Bitmap.Events(); a.unusedGen >= ev && h == a.unusedGen {
				ev, same = h, true
			} else {
				ev = max(ev, h+1)
			}
		})
	}
	now := time.Now().UnixNano()
	var errs []error
	wrote := 0
	var roles []int
	sbs := make([]engine.Superblock, len(a.Members))
	blocks := make([][]byte, len(a.Members))
	// A role with no member here (missing) keeps the entry of the
	// freshest superblock: every member of one generation must carry the
	// same role table, and members assembled one event apart (the slack
	// for torn updates) may remember a missing role differently.
	var fresh *engine.Superblock
	for _, s := range a.SBs {
		if s != nil && (fresh == nil || s.Events > fresh.Events) {
			fresh = s
		}
	}
	for r, m := range a.Members {
		if m == nil || st.Members[r].State == engine.MemberFaulty || st.Members[r].State == engine.MemberMissing {
			continue
		}
		sb := *a.SBs[r]
		sb.Events = ev
		sb.UpdateTime = now
		sb.Clean, sb.ResyncOffset = a.cleanState(clean)
		a.setSpareEntries(&sb)
		for i := range st.Members {
			if a.SBs[i] != nil {
				sb.Roles[i].Member = a.SBs[i].MemberUUID
			} else if fresh != nil {
				sb.Roles[i].Member = fresh.Roles[i].Member
			}
			sb.Roles[i].RecoveryOffset = 0
			switch st.Members[i].State {
			case engine.MemberFaulty:
				sb.Roles[i].State = engine.RoleFaulty
			case engine.MemberMissing:
				sb.Roles[i].State = engine.RoleMissing
			case engine.MemberRebuilding:
				sb.Roles[i].State = engine.RoleRebuilding
				sb.Roles[i].RecoveryOffset = a.checkpoint[i] // durable, not just reached
			case engine.MemberActive:
				sb.Roles[i].State = engine.RoleActive
			}
		}
		// Marshalled, and so validated, before anything is written: one
		// that is not valid refuses the whole update.
		b, err := sb.MarshalBinary()
		if err != nil {
			return fmt.Errorf("superblock of role %d: %w; nothing written", r, err)
		}
		sbs[r], blocks[r] = sb, b
		roles = append(roles, r)
	}
	members := append([]*Member(nil), a.Members...)
	if len(roles) > 0 && (sbs[roles[0]].Clean || sbs[roles[0]].ResyncOffset != 0) {
		// A clean mark (or a resync position: the copies in sync below
		// it) vouches for the data the members took: without a bitmap
		// it alone spares the next start a full resync. Every member's
		// cache is flushed, and all must succeed, before any superblock
		// says so (md writes its superblocks with PREFLUSH): otherwise a
		// clean mark may reach the media ahead of cached data, or reach
		// one member whose flush made its data durable while the power
		// cut takes another's.
		errs := writeAll(members, roles, a.MemberTimeout, func(r int) error { return memberSync(members[r]) })
		for _, r := range roles {
			if errs[r] != nil {
				return fmt.Errorf("not marked clean: flushing role %d: %w; nothing written (the next start resyncs)", r, errs[r])
			}
		}
	}
	write := func(r int, b []byte) error {
		m := members[r]
		if !m.sbWriting.CompareAndSwap(false, true) {
			return errSuperblockLate
		}
		defer m.sbWriting.Store(false)
		return writeSuperblock(m, b)
	}
	for _, r := range roles {
		sole := st.Members[r].State == engine.MemberActive && !a.Engine.CoveredWithout(r)
		if a.Members[r].sbWriting.Load() && sole {
			// It would be held (see write below): refused before the
			// bitmap header takes the generation, so that held updates do
			// not move generations on while no superblock takes them.
			return fmt.Errorf("superblock update not written: the last in-sync copy did not take it: role %d: %w", r, errSuperblockLate)
		}
		// A generation the member may hold (a write given up after the
		// timeout, or taken but not flushed) is made certain on it before
		// the next: given the next one first, the member could end two
		// generations ahead of members that never took the uncertain one.
		// With it certain, the members behind take the next one first.
		p := a.Members[r].sbPending
		if p == nil {
			continue
		}
		err := writeAll(members, []int{r}, a.MemberTimeout, func(r int) error { return write(r, p.block) })[r]
		if err == nil {
			*a.SBs[r] = p.sb
			a.Members[r].sbPending = nil
		} else if sole {
			return fmt.Errorf("superblock update not written: the last in-sync copy did not take generation %d again: role %d: %w", p.sb.Events, r, err)
		}
	}
	if a.fl != nil {
		for r, m := range st.Members {
			if !writable(m) {
				a.Bitmap.SetMissing(r, true)
			}
		}
		// The bitmap header must carry the new generation first: a copy
		// older than the superblocks is not trusted at assembly.
		got, err := a.fl.generation(ev, clean, same)
		if err != nil {
			return err
		}
		a.unusedGen = 0 // taken again now, or passed
		if got != ev {
			// Not reached (see ev); a header ahead of the superblocks is
			// trusted, so stopping here loses nothing.
			return fmt.Errorf("the bitmap header took generation %d, not %d: superblocks not written", got, ev)
		}
		if cur := a.Engine.State(); failedSince(st, cur) {
			// A member failed while the bitmap writer made ev durable (a
			// flush or write of its batch failed: it is recorded off the
			// writer's goroutine). These superblocks, made from st, would
			// record it in sync, though the batch, a clear say, relied on
			// it: this generation records it failed instead, taken again
			// from the header (unusedGen) with the newer state.
			a.unusedGen = ev
			return a.writeSuperblocks(cur, clean)
		}
	}
	before := a.events
	a.events = ev
	// untaken: no superblock took ev, and none can later: a write given
	// up after the timeout may still land, and so may one the device took
	// but failed to flush. (A write the device failed is taken as not
	// written, as md takes it.)
	untaken := func(errs []error) bool {
		for _, err := range errs {
			if err == nil || errors.Is(err, errMemberTimeout) || errors.Is(err, errWrittenNotFlushed) {
				return false
			}
		}
		return true
	}
	// Members holding the last in-sync copy of some data take the
	// generation first, and the others only if they all did: were the
	// others written alone, the one copy of the data would lag them,
	// again at every update while its writes fail, and assembly does not
	// trust a member more than EventSlack generations behind (an older
	// copy of the same device looks just the same). Members behind the
	// others (an update that such a member did not take stopped there)
	// go before those ahead, in the same order: with several members
	// each holding the last copy of other data (raid10), the ones that
	// took an update would otherwise move on at every update while one
	// of them fails its writes, leaving it generations behind.
	top := uint64(0)
	for _, r := range roles {
		top = max(top, a.SBs[r].Events)
	}
	var phases [4][]int // behind and sole, behind, ahead and sole, ahead
	for _, r := range roles {
		p := 0
		if a.SBs[r].Events >= top {
			p = 2
		}
		if st.Members[r].State != engine.MemberActive || a.Engine.CoveredWithout(r) {
			p++
		}
		phases[p] = append(phases[p], r)
	}
	werrs := make([]error, len(members))
	tried := make([]bool, len(members))
	var held []error
	for _, ph := range phases {
		if len(ph) == 0 {
			continue
		}
		if held != nil {
			break
		}
		for _, r := range ph {
			tried[r] = true
		}
		res := writeAll(members, ph, a.MemberTimeout, func(r int) error { return write(r, blocks[r]) })
		for _, r := range ph {
			err := res[r]
			members[r].sbPending = nil
			if err == nil {
				continue
			}
			werrs[r] = err
			if errors.Is(err, errMemberTimeout) || errors.Is(err, errWrittenNotFlushed) {
				// The member may hold this generation.
				members[r].sbPending = &pendingSuperblock{sbs[r], blocks[r]}
			}
			if st.Members[r].State == engine.MemberActive && !a.Engine.CoveredWithout(r) {
				held = append(held, err)
			}
		}
	}
	if held != nil {
		// The members written so far hold the generation; the others keep
		// theirs (none is failed: that record would be held the same way).
		for _, r := range roles {
			if tried[r] && werrs[r] == nil {
				*a.SBs[r] = sbs[r]
			}
		}
		if untaken(pick(werrs, tried)) { // (false if any took it)
			a.events, a.unusedGen = before, ev
		}
		return fmt.Errorf("superblock update %d not written: the last in-sync copy did not take it: %w", ev, errors.Join(held...))
	}
	var notWritten []int
	for _, r := range roles {
		if werrs[r] != nil {
			errs = append(errs, fmt.Errorf("superblock of role %d: %w", r, werrs[r]))
			notWritten = append(notWritten, r)
			continue
		}
		*a.SBs[r] = sbs[r]
		wrote++
	}
	if wrote == 0 {
		if untaken(pick(werrs, tried)) {
			a.events, a.unusedGen = before, ev
		}
		return errors.Join(append(errs, errors.New("no member took the superblock update"))...)
	}
	a.stateGen = st.Gen
	a.durable.Store(st.Gen)
	a.releaseLogHold()
	if a.reported == nil {
		a.reported = make([]bool, len(st.Members))
	}
	for r, m := range st.Members {
		if m.State != engine.MemberFaulty {
			a.reported[r] = false // a failure after a re-add or replace is news again
			continue
		}
		if !a.reported[r] {
			a.reported[r] = true
			if a.OnMemberFailed != nil {
				path := ""
				if a.Members[r] != nil {
					path = a.Members[r].Path
				}
				a.OnMemberFailed(r, path)
			}
			if len(a.spares) > 0 {
				go a.activateSpare()
			} else {
				go a.interruptScrub()
			}
		}
	}
	// A member that did not take the update holds an old state: fail it,
	// and record that on the others (each round fails at least one more
	// member, so this ends). Not the last in-sync copy of some data (md
	// never fails that one): it stays, one event behind (which assembly
	// allows), and the update reports its error.
	failed := false
	for _, r := range notWritten {
		if _, changed, _ := a.Engine.FailRedundant(r); changed {
			failed = true
		}
	}
	if failed {
		return a.writeSuperblocks(a.Engine.State(), clean)
	}
	return errors.Join(errs...)
}

// errSuperblockLate fails a superblock write to a member whose previous
// one, given up after the member timeout, has not returned.
var errSuperblockLate = errors.New("a superblock write given up after the member timeout is still out on it")

// writeSuperblock writes a superblock block to m durably (a variable:
// tests inject failures).
var writeSuperblock = func(m *Member, b []byte) error {
	return writeSB(m, b)
}

// writeSB writes superblock block b to m durably: its shadow copy first,
// where the member's layout has one, then the primary, each flushed, so
// that a power cut tears at most one of them (engine.ReadSuperblock takes
// the shadow where the primary was torn).
func writeSB(m *Member, b []byte) error {
	if off, ok := engine.ShadowOffsetOf(b); ok {
		if err := m.WriteBlockSync(int64(off), b); err != nil {
			return err
		}
	}
	return m.WriteBlockSync(engine.SuperblockOffset, b)
}

// Degraded reports whether some member is not active.
func (a *Array) Degraded() bool {
	for _, m := range a.Engine.State().Members {
		if m.State != engine.MemberActive {
			return true
		}
	}
	return false
}

// bitmapOptions is o with Notify signalling the flusher.
func (a *Array) bitmapOptions(o bitmap.Options) bitmap.Options {
	a.notify = make(chan struct{}, 1)
	o.Notify = func() {
		select {
		case a.notify <- struct{}{}:
		default:
		}
	}
	o.FirstWrite = a.markFill
	return o
}

// start starts the bitmap's flusher, before anything else is written
// (superblock generations go through it) and before the array serves I/O
// (the bitmap's first batches rewrite its copy on every member).
func (a *Array) start() {
	a.mu.Lock()
	for r, m := range a.Members {
		if a.current[r].Load() == nil || a.currentMember(r) != m {
			// (Not again when a grow restarts the flusher: operations in
			// flight would look departed.)
			a.publishFile(r, m)
		}
	}
	a.mu.Unlock()
	if a.Bitmap == nil || a.fl != nil {
		return
	}
	fl := newFlusher(a, a.Bitmap)
	fl.onMemberError = func(role int, err error) bool {
		if a.OnBitmapMemberError != nil {
			a.OnBitmapMemberError(role, err)
		}
		// The last in-sync copy is kept (its bitmap copy stays missing).
		st, changed, _ := a.Engine.FailRedundant(role)
		if changed {
			go a.persist(st) // waits for the flusher, so not on it
		}
		return st.Members[role].State == engine.MemberActive
	}
	// Published under the lock its readers (writeSuperblocks) hold: a
	// grow starts a new flusher while a persist may run.
	a.mu.Lock()
	a.fl = fl
	a.mu.Unlock()
	go fl.run()
}

// route hands bitmap tokens (queue<<32 | tag) to their queues and wakes
// them: released ones (the write proceeds), or failed ones (their batch
// failed: the write fails unissued, errBitmapWrite). Flusher goroutine.
func (a *Array) route(tokens []bitmap.Waiter, failed bool) {
	if len(tokens) == 0 {
		return
	}
	a.qmu.Lock()
	defer a.qmu.Unlock()
	for _, t := range tokens {
		if h := a.queues[int(t>>32)]; h != nil && h.post(uint16(t), failed) {
			h.q.Wake()
		}
	}
}

// errBitmapWrite fails a write whose regions the write-intent bitmap
// could not make dirty on a member kept in sync.
var errBitmapWrite = errors.New("the write-intent bitmap write failed on the last in-sync copy: write not issued")

// Configure runs fn, which sets fields of the array read by its
// goroutines (MemberTimeout, OnMemberFailed, OnBitmapMemberError) after
// Open, ordered with the bitmap flusher Open started, which reads them:
// fn runs on the flusher's goroutine when there is one (else, or once it
// has stopped, here).
func (a *Array) Configure(fn func()) {
	a.mu.Lock()
	fl := a.fl
	a.mu.Unlock()
	ran := false
	if fl != nil {
		fl.do(func() { fn(); ran = true })
	}
	if !ran {
		fn()
	}
}

// roleDevice is a role's device as the queues see it. One is made each
// time a device takes the role, the same device re-added included: an
// operation sent to it before its failure is then told apart from one
// sent after the re-add (queue.Departed), whose errors are the role's.
type roleDevice struct{ m *Member }

// publishFile makes m (nil: none) the member queue threads use for role.
func (a *Array) publishFile(role int, m *Member) {
	if m == nil {
		a.current[role].Store(nil)
		return
	}
	a.current[role].Store(&roleDevice{m: m})
}

// currentMember is role's device as queue threads see it (nil: none).
func (a *Array) currentMember(role int) *Member {
	if d := a.current[role].Load(); d != nil {
		return d.m
	}
	return nil
}

// swapFile brings role's member m (nil: none), published (publishFile)
// under a.mu with a.Members, into every queue and, once no queue's ring
// holds old any more, closes old (nil: nothing to close), so the device
// is free for other users. Queue threads update their fixed-file tables
// on their next wake-up or tick (at most a second); a queue that does not
// within filesWait keeps old open (a later stop closes it) and swapFile
// reports that.
func (a *Array) swapFile(role int, m, old *Member) error {
	epoch := a.filesEpoch.Add(1)
	a.qmu.Lock()
	qs := make([]*queue, 0, len(a.queues))
	for _, h := range a.queues {
		qs = append(qs, h)
		h.q.Wake()
	}
	a.qmu.Unlock()
	if old == nil || old == m {
		return nil
	}
	deadline := time.Now().Add(filesWait)
	for _, h := range qs {
		for !h.closed.Load() && h.filesSeen.Load() < epoch {
			if time.Now().After(deadline) {
				a.mu.Lock()
				a.leaked = append(a.leaked, old)
				a.mu.Unlock()
				return fmt.Errorf("queue %d did not release %s: it stays open until the array stops", h.q.ID(), old.Path)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	a.closeWhenAnswered(old)
	return nil
}

// closeWhenAnswered closes m, a device that left the array, once no
// operation is out on it (given up after the member timeout, or not yet:
// Member.busy), or when the array stops: until then it stays open (an exclusive claim on a block
// device), as md keeps a device with I/O pending (EBUSY), so that no
// other user takes it while a late write may still land there.
func (a *Array) closeWhenAnswered(m *Member) {
	if !lateOn(m) && !m.busy() {
		m.Close()
		return
	}
	a.mu.Lock()
	a.answering = append(a.answering, m)
	a.mu.Unlock()
	go func() {
		for {
			time.Sleep(lateWait)
			a.mu.Lock()
			i := slices.Index(a.answering, m)
			if i < 0 {
				a.mu.Unlock()
				return // closed with the array
			}
			if !lateOn(m) && !m.busy() {
				a.answering = slices.Delete(a.answering, i, i+1)
				a.mu.Unlock()
				m.Close()
				return
			}
			a.mu.Unlock()
		}
	}()
}

// filesWait bounds how long swapFile waits for the queues.
const filesWait = 10 * time.Second

// Close stops the background job and the bitmap flusher and closes the
// members.
func (a *Array) Close() {
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	a.spareMu.Lock() // an activation under way finishes first
	a.spareMu.Unlock()
	a.StopSync()
	a.stopParityLog()
	if a.stopRepairs != nil {
		a.stopRepairs()
		a.stopRepairs = nil
	}
	if a.syncBounce != nil {
		a.syncBounce.close() // no job runs any more
	}
	// Under the lock: a persist under way (a failure recorded from the
	// flusher's goroutine) finishes first, and none writes afterwards.
	a.mu.Lock()
	fl := a.fl
	a.fl = nil
	a.closed = true
	spares := a.spares
	a.spares = nil
	answering := a.answering
	a.answering = nil
	a.mu.Unlock()
	if fl != nil {
		fl.close()
	}
	if a.undoOnClose {
		// Nothing writes the members any more: the creation is undone
		// before they are closed.
		wait := undoLateWait
		if t := a.MemberTimeout; t > 0 && t < wait {
			wait = t
		}
		a.undoErr = undoWrites(a.createUndo, wait)
		a.createUndo = nil
	}
	for _, m := range answering {
		m.Close()
	}
	for _, m := range a.Members {
		if m != nil {
			m.Close()
		}
	}
	for _, m := range a.leaked {
		m.Close()
	}
	for _, s := range spares {
		s.m.Close()
	}
}

// checkRecorded refuses an assembly that leaves out a role the freshest
// superblock records active (CreateSpec.AsRecorded).
func checkRecorded(asm *engine.Assembly) error {
	for i, r := range asm.Roles {
		if i >= len(asm.Freshest.Roles) || asm.Freshest.Roles[i].State != engine.RoleActive || r.State != engine.RoleMissing {
			continue
		}
		older := ""
		if r.StalePath != "" {
			older = fmt.Sprintf(" (%s is an older member of the role)", r.StalePath)
		}
		return fmt.Errorf("%w: role %d is active in the freshest superblock, on member %s, and none of the devices given holds it%s: the array would start without it, which makes it stale; give its device, or assemble by hand from the members you choose (add MEMBER...)",
			ErrMemberAbsent, i, engine.UUIDString(r.Member), older)
	}
	return nil
}

// checkAbsent allows an assembly without the absent paths only if every
// role the freshest superblock records active is held by a member given,
// trusted or stale: the absent devices are then failed, missing, replaced,
// rebuilding (never the only copy of anything) or spare members, which
// md's assembly starts without too.
func checkAbsent(asm *engine.Assembly, absentPaths []string) error {
	for i, r := range asm.Roles {
		if i >= len(asm.Freshest.Roles) {
			break
		}
		rec := asm.Freshest.Roles[i].State
		if rec == engine.RoleActive && r.Path == "" && r.StalePath == "" {
			return fmt.Errorf("%w: role %d is %s in the freshest superblock present, and its member is not present (absent: %s); it may hold the freshest data: bring it back, or assemble by hand from the members present (add MEMBER...)",
				ErrMemberAbsent, i, rec, strings.Join(absentPaths, ", "))
		}
	}
	return nil
}
