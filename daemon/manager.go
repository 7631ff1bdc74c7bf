package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// QueueOptions are the ublk queue settings the daemon applies to every
// device it creates or recovers (see ublk.Config).
type QueueOptions struct {
	NoPin          bool
	CPUs           ublk.QueueCPUs // where queue threads run ("": ublk's default)
	NoFixedBuffers bool
	// NoZeroCopy keeps the copy path where the kernel offers zero copy.
	NoZeroCopy bool
	// BatchIO creates devices with UBLK_F_BATCH_IO (recovered devices
	// keep what they were created with).
	BatchIO      bool
	DeferTaskrun bool
	PollFor      time.Duration
	// Scheduler is written to each device's queue/scheduler ("": the
	// kernel's choice).
	Scheduler string
	// MemberTimeout fails a member whose I/O takes longer (0: never).
	MemberTimeout time.Duration
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// StateFile is the state file's path ("" keeps no state file).
	StateFile string
	Log       *zap.Logger
	Queue     QueueOptions
	// OnChange, if set, is called after the set of arrays changed, with
	// the number of arrays served (outside the Manager's locks).
	OnChange func(arrays int)
}

// Manager is the real Backend: every array is an array.Array served by a
// ublk.Device, both owned by the Manager from Add (or Restore) to Delete
// (or Shutdown). It is also the metrics.Source of the daemon.
type Manager struct {
	ctrl *ublk.Control
	opts ManagerOptions
	log  *zap.Logger

	addMu   sync.Mutex // serialises Add and Restore (device numbers)
	closed  bool       // Shutdown ran (guarded by addMu)
	stateMu sync.Mutex // serialises state file writes; taken before mu
	mu      sync.Mutex // guards arrays and pending
	arrays  map[int]*served
	// pending are state file entries whose array could not be started
	// (members missing, ...): kept in the state file until deleted.
	pending map[int]StateEntry
	// growing are the arrays a grow (or recoverFailed) is handing over (in pending
	// meanwhile, so that the state file keeps them): not deleted, not
	// operated on until it ends.
	growing map[int]bool
	// stopping is set by Shutdown (guarded by mu): the served arrays are
	// taken out of arrays to stop them (into stopped), and the state file
	// is written from stopped: the next daemon must still find them, as a
	// member operation that was under way recorded them.
	stopping bool
	stopped  []*served
	// deleting are the arrays a Delete took out of arrays while it asks
	// the kernel to stop their devices: the state file keeps them until
	// the stop is done (a refused one puts them back, changing nothing).
	deleting map[int]*served
}

// served is one array and its device.
type served struct {
	n         int
	a         *array.Array
	d         *ublk.Device
	entry     StateEntry
	created   bool
	recovered bool
	since     time.Time
	opMu      sync.Mutex // serialises member operations on the array
}

var (
	_ Backend        = (*Manager)(nil)
	_ metrics.Source = (*Manager)(nil)
)

// NewManager returns a Manager creating devices through ctrl, which must
// stay open as long as the Manager is used.
func NewManager(ctrl *ublk.Control, opts ManagerOptions) *Manager {
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Manager{ctrl: ctrl, opts: opts, log: log, arrays: map[int]*served{}, pending: map[int]StateEntry{}, growing: map[int]bool{}, deleting: map[int]*served{}}
}

// Restore starts the arrays of the state file (see the package comment):
// it re-attaches to devices that still exist (user recovery) and assembles
// the others afresh at their device numbers. Arrays that cannot be started
// are logged and kept as pending entries. It returns the number of arrays
// started and failed; an unreadable state file is an error (it is not
// overwritten).
func (m *Manager) Restore() (started, failed int, err error) {
	if m.opts.StateFile == "" {
		return 0, 0, nil
	}
	st, err := LoadState(m.opts.StateFile)
	if err != nil {
		return 0, 0, err
	}
	m.addMu.Lock()
	// Every entry is pending until its array is tracked (served): a state
	// file write while the loop runs (a spare activated by an array's
	// start writes it) must keep the entries not yet started, and the
	// one starting, or a crash before the write below forgets them.
	// (No Add, retry or del runs meanwhile: they take addMu; the API is
	// not served yet.)
	m.mu.Lock()
	for _, e := range st.Arrays {
		m.pending[e.Number] = e
	}
	m.mu.Unlock()
	for _, e := range st.Arrays {
		s, err := m.restore(e, openRetry)
		if err != nil {
			failed++
			m.log.Error("array not started", zap.String("device", DevicePath(e.Number)), zap.String("uuid", e.UUID),
				zap.Strings("members", e.Members), zap.Error(err))
			continue // (pending already)
		}
		started++
		m.track(s) // (no longer pending)
	}
	m.addMu.Unlock()
	if err := m.saveState(); err != nil {
		m.log.Error("state file not written", zap.Error(err))
	}
	m.changed()
	return started, failed, nil
}

// RetryPending tries again to start the pending entries (members may
// appear after the daemon starts, as udev coldplugs them). It returns the
// number still pending. Failures are logged at debug level: Restore has
// logged the first one. Each entry gets one assembly attempt: a member
// held elsewhere (EBUSY) is not waited for as Restore waits (openRetry),
// since this runs under addMu every pendingRetryEvery, and waiting would
// hold every add, del and the daemon's shutdown up to 10 s per entry.
func (m *Manager) RetryPending() int {
	m.addMu.Lock()
	if m.closed {
		m.addMu.Unlock()
		return 0
	}
	m.mu.Lock()
	var es []StateEntry
	for n, e := range m.pending {
		if !m.growing[n] { // (a hand-over under way: its members still open)
			es = append(es, e)
		}
	}
	m.mu.Unlock()
	started := 0
	for _, e := range es {
		s, err := m.restore(e, openOnce)
		if err != nil {
			m.log.Debug("array still not started", zap.String("device", DevicePath(e.Number)), zap.Error(err))
			continue
		}
		started++
		m.track(s)
	}
	m.mu.Lock()
	left := len(m.pending)
	m.mu.Unlock()
	m.addMu.Unlock()
	if started > 0 {
		if err := m.saveState(); err != nil {
			m.log.Error("state file not written", zap.Error(err))
		}
		m.changed()
	}
	return left
}

// restore starts the array of state entry e, assembled by open.
func (m *Manager) restore(e StateEntry, open func([]string, array.CreateSpec) (*array.Array, error)) (*served, error) {
	if e.Number < 0 || len(e.Members) == 0 {
		return nil, fmt.Errorf("state entry %d: invalid", e.Number)
	}
	// Checked before anything is opened or written (the assembly's dirty
	// mark): what add refuses, a hand-edited or foreign entry may hold.
	for _, p := range append(slices.Clone(e.Members), e.Joining...) {
		if !filepath.IsAbs(p) || checkText(p) != nil {
			// Resolved against the daemon's working directory (/ under
			// systemd): not the device meant; or not text. The API
			// refuses them too.
			return nil, fmt.Errorf("state entry %s: member path %q is not an absolute path", DevicePath(e.Number), p)
		}
	}
	if err := m.config(e.Number, e.Queues, e.Depth, e.MaxIOBytes).ValidateQueues(); err != nil {
		return nil, fmt.Errorf("state entry %s: %w", DevicePath(e.Number), err)
	}
	// One device under two paths (a hand edit; a by-id name beside the
	// kernel's): opened once, as md opens a device once; the later name
	// is dropped, said.
	for i := 1; i < len(e.Members); i++ {
		if j := slices.IndexFunc(e.Members[:i], func(q string) bool { return sameDevice(q, e.Members[i]) }); j >= 0 {
			m.log.Warn("state entry: a member listed twice, under two paths: the second left out",
				zap.String("device", DevicePath(e.Number)), zap.String("member", e.Members[j]), zap.String("alias", e.Members[i]))
			e.Members = slices.Delete(slices.Clone(e.Members), i, i+1)
			i--
		}
	}
	id := uint32(e.Number)
	exists := true
	info, err := devInfo(m.ctrl, id)
	switch {
	case errors.Is(err, unix.ENODEV):
		exists = false
	case err != nil:
		return nil, err
	case info.State == ublk.StateDead:
		// Stopped but not deleted (a server died while deleting it):
		// nothing is left to re-attach to; start afresh.
		if err := m.ctrl.DelDev(id); err != nil {
			return nil, fmt.Errorf("deleting the stopped device %d: %w", id, err)
		}
		exists = false
	}
	if exists {
		// Re-attached below: a device this server cannot recover (made
		// by another program, without user recovery) is refused before
		// the assembly, which may write the members (a write-hole log
		// replay), not after it.
		if err := ublk.CheckRecoverInfo(id, info); err != nil {
			return nil, err
		}
	} else if feats, err := driverFeatures(m.ctrl); err == nil {
		// Created below: a feature the driver lacks (serve --batch-io
		// before 7.0) is refused before the dirty mark. (A device
		// re-attached keeps its own features.)
		if err := ublk.CheckFeatures(feats, m.config(e.Number, e.Queues, e.Depth, e.MaxIOBytes)); err != nil {
			return nil, fmt.Errorf("state entry %s: %w", DevicePath(e.Number), err)
		}
	}
	// Devices a member operation was putting in when the daemon died:
	// those its superblock write reached are members.
	if len(e.Joining) > 0 {
		var unread []string
		for _, p := range e.Joining {
			if slices.Contains(e.Members, p) {
				continue
			}
			switch joined(p, e.UUID, e.Members) {
			case joinedYes:
				m.log.Warn("state entry: a device a member operation was adding when the daemon stopped is the array's: assembled with it",
					zap.String("device", DevicePath(e.Number)), zap.String("member", p))
				e.Members = append(slices.Clone(e.Members), p)
			case joinedUnknown:
				unread = append(unread, p)
			}
		}
		if len(unread) > 0 {
			// Not there yet (a disk udev has not brought up), or not
			// readable: whether the operation reached it is not known,
			// and a device listed that its superblock does not make a
			// member would stop every later start. Left out, said.
			m.log.Warn("state entry: devices a member operation was adding when the daemon stopped cannot be read: left out (once they are there, re-add them, or add them as spares, if they were being added)",
				zap.String("device", DevicePath(e.Number)), zap.Strings("members", unread))
		}
		e.Joining = nil // (the caller saves the entry)
	}
	// Members absent (a failed disk pulled before it was removed) are
	// left out when the superblocks present record them failed, missing
	// or spare (array.CreateSpec.SkipAbsent): md starts such an array
	// without them; an absent active member keeps the array pending.
	a, err := open(e.Members, m.restoreSpec(e))
	if err == nil && len(a.Absent) > 0 {
		m.log.Warn("members absent, or holding no superblock of the array: the array starts without them (its superblocks record them failed, missing or spare)",
			zap.String("device", DevicePath(e.Number)), zap.String("uuid", e.UUID), zap.Strings("absent", a.Absent))
	}
	if err != nil {
		return nil, err
	}
	if uuid := a.Status().UUID; e.UUID != "" && uuid != e.UUID {
		a.Close()
		return nil, fmt.Errorf("the members hold array %s, not %s", uuid, e.UUID)
	}
	if err := markWriteMostly(a, e); err != nil {
		m.log.Warn("state entry: write-mostly member not in the array", zap.Error(err))
	}
	cfg := m.config(e.Number, e.Queues, e.Depth, e.MaxIOBytes)
	grown := false
	if exists {
		p, err := m.ctrl.GetParams(id)
		if err != nil {
			a.Close()
			return nil, err
		}
		// Smaller, at the size the state file says a grow began from, on
		// a device that can resize: a grow recorded in the superblocks
		// whose UPDATE_SIZE did not happen (a crash between them);
		// finished once the device is served.
		want := a.Params().Basic.DevSectors
		grown = p.Basic.DevSectors < want && info.Flags&ublk.FlagUpdateSize != 0 && p.Basic.DevSectors == e.GrowFromSectors
		if p.Basic.DevSectors != want && !grown {
			a.Close()
			return nil, fmt.Errorf("%s has %d sectors, the array %d: it is not this array's device", DevicePath(e.Number), p.Basic.DevSectors, want)
		}
	}
	s, err := m.start(a, e.Number, cfg, exists)
	if err != nil {
		return nil, err
	}
	if grown {
		if err := s.d.UpdateSize(a.Params().Basic.DevSectors); err != nil {
			m.log.Error("grow: device size not updated", zap.String("device", s.d.BlockPath()), zap.Error(err))
		} else {
			e.GrowFromSectors = 0 // the caller saves the state
			m.log.Warn("grow finished: the device takes the array's grown size", zap.String("device", s.d.BlockPath()), zap.Uint64("size_bytes", a.Params().Basic.DevSectors<<9))
		}
	} else {
		// The device has the array's size (a mismatch returned above),
		// or is new: no grow to finish.
		e.GrowFromSectors = 0
	}
	// The entry lists what the array holds (the caller saves it): a
	// member removed or replaced by a daemon that died before its state
	// file write is dropped here, or it stays listed for good (remove
	// finds no role of it), and once that disk is reused the next start
	// refuses the array.
	if held := entryMembers(a, e.Members); len(held) != len(e.Members) {
		m.log.Warn("state entry: paths the array no longer holds (removed or replaced) dropped", zap.String("device", DevicePath(e.Number)),
			zap.Strings("members", held), zap.Strings("dropped", slices.DeleteFunc(slices.Clone(e.Members), func(p string) bool { return slices.Contains(held, p) })))
		e.Members = held
		e.pruneWriteMostly()
	}
	m.mu.Lock() // (a spare activated since start writes s.entry too)
	s.entry = e
	m.mu.Unlock()
	// A spare activated as the array started holds the role of a
	// write-mostly member, and its mark (the activation recorded it in
	// the entry just replaced).
	m.followWriteMostly(s, a.Status())
	return s, nil
}

// entryMembers are the paths of listed (a state entry's members) that its
// entry keeps for array a, assembled from them: those a holds in a role
// or as a spare; a failed member's, which assembly leaves closed
// (Array.FailedRoleOf: remove finds its role by it, and drops it); and
// the absent ones assembly left out (Array.Absent: remove drops them).
// What else is listed is a device the array let go of (removed, or
// replaced: its superblock names no role of the array any more).
func entryMembers(a *array.Array, listed []string) []string {
	held := memberPaths(a.Status())
	var keep []string
	for _, p := range listed {
		if slices.Contains(held, p) || slices.Contains(a.Absent, p) || a.FailedRoleOf(p) >= 0 {
			keep = append(keep, p)
		}
	}
	return keep
}

// joinedYes, joinedNo and joinedUnknown answer joined.
const (
	joinedNo = iota
	joinedYes
	joinedUnknown
)

// joined says whether the device at path, which a member operation was
// putting into the array whose UUID is uuid when the daemon stopped
// (StateEntry.Joining), is now one of its members or spares: its
// superblock names the array, as a member none of the listed paths is
// (a copy of a listed member, or another path to it, was refused by the
// operation: assembled beside it, it would stop the array), and the
// freshest superblock of the listed members names that member in a role
// (active or rebuilding) or as a spare: the operation's superblock
// update reached them. A device that only carries an old superblock of
// the array (the other side of a split brain, a member that left it) is
// not taken on its own say. joinedUnknown: the device cannot be opened or
// read (not there yet at boot): restore leaves it out, and says so. Read
// only; an empty uuid, from an old state file, matches nothing.
func joined(path, uuid string, listed []string) int {
	if uuid == "" {
		return joinedNo
	}
	sb, err := readSuperblock(path)
	var perr *superblockParseError
	switch {
	case errors.As(err, &perr):
		return joinedNo // (blank, or not ours)
	case err != nil:
		return joinedUnknown
	case engine.UUIDString(sb.ArrayUUID) != uuid:
		return joinedNo
	}
	var fresh *engine.Superblock
	for _, p := range listed {
		o, err := readSuperblock(p)
		if err != nil || engine.UUIDString(o.ArrayUUID) != uuid {
			continue
		}
		if o.MemberUUID == sb.MemberUUID {
			return joinedNo
		}
		if fresh == nil || o.Events > fresh.Events {
			fresh = o
		}
	}
	if fresh == nil {
		return joinedNo
	}
	if sb.Events > fresh.Events {
		// (The operation's update gives the device the members'
		// generation, or, a spare, an older one: ahead of them all it ran
		// elsewhere since. Unless one ahead as a spare activated within
		// the operation (add-spare activates one for a role waiting)
		// whose update a power cut let reach it alone: its own table
		// names it in its role, rebuilding, which assembly takes.)
		own := sb.Role < sb.Members && sb.Roles[sb.Role].Member == sb.MemberUUID &&
			sb.Roles[sb.Role].State == engine.RoleRebuilding
		if sb.Events != fresh.Events+1 || !own {
			return joinedNo
		}
	}
	for _, r := range fresh.Roles {
		if r.Member == sb.MemberUUID && (r.State == engine.RoleActive || r.State == engine.RoleRebuilding || r.State == engine.RoleSpare) {
			return joinedYes
		}
	}
	return joinedNo
}

// superblockParseError: readSuperblock read the block, which holds no
// valid superblock.
type superblockParseError struct{ err error }

func (e *superblockParseError) Error() string { return e.err.Error() }
func (e *superblockParseError) Unwrap() error { return e.err }

// readSuperblock reads the superblock of the device at path (read only).
func readSuperblock(path string) (*engine.Superblock, error) {
	d, err := ublk.OpenMemberReadOnly(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	sb, _, err := engine.ReadSuperblock(d.ReadBlock, d.Size)
	if errors.Is(err, engine.ErrNoSuperblock) || errors.Is(err, engine.ErrCorruptSuperblock) {
		return nil, &superblockParseError{err}
	}
	return sb, err
}

// joining records paths as devices a member operation on s is putting
// into the array (StateEntry.Joining), before it writes their
// superblocks; endJoining forgets them (saved with the operation's own
// state file write, or by the caller). A failed write is logged only:
// the operation's own write tells the user.
func (m *Manager) joining(s *served, paths []string) {
	m.mu.Lock()
	s.entry.Joining = slices.Clone(paths)
	m.mu.Unlock()
	if err := m.saveState(); err != nil {
		m.log.Error("state file not written", zap.String("device", DevicePath(s.n)), zap.Error(err))
	}
}

func (m *Manager) endJoining(s *served) {
	m.mu.Lock()
	s.entry.Joining = nil
	m.mu.Unlock()
}

// restoreSpec is how the array of state entry e is assembled at a
// (re)start: that array only, not served already at another number; an
// absent member left out when the superblocks present record it failed,
// missing or spare; every member recorded active present (otherwise the
// entry stays pending: see CreateSpec.AsRecorded).
func (m *Manager) restoreSpec(e StateEntry) array.CreateSpec {
	c := m.config(e.Number, e.Queues, e.Depth, e.MaxIOBytes).Normalized()
	return array.CreateSpec{SyncMinBytes: e.SyncMinBytes, SyncMaxBytes: e.SyncMaxBytes, SkipAbsent: true, AsRecorded: true, UUID: e.UUID,
		Queues: c.Queues, MaxIOBytes: c.MaxIOBytes,
		Taken: func(uuid string, member *[16]byte) error { return m.taken(uuid, member, e.Number) }}
}

// openOnce assembles the array of members (a variable: tests count the
// attempts).
var openOnce = func(members []string, spec array.CreateSpec) (*array.Array, error) {
	return array.Open(members, spec, false)
}

// openRetry assembles the array of members, waiting a little while a
// member is still held by a server that is exiting.
func openRetry(members []string, spec array.CreateSpec) (*array.Array, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := openOnce(members, spec)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return a, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (m *Manager) config(n, queues, depth, maxIO int) ublk.Config {
	q := m.opts.Queue
	return ublk.Config{ID: n, Queues: queues, Depth: depth, MaxIOBytes: maxIO,
		NoPin: q.NoPin, CPUs: q.CPUs, NoFixedBuffers: q.NoFixedBuffers, NoZeroCopy: q.NoZeroCopy, BatchIO: q.BatchIO, DeferTaskrun: q.DeferTaskrun, PollFor: q.PollFor, Scheduler: q.Scheduler}
}

// start serves a (owned by start from here on: closed on error) on
// device n, created or, with recover, re-attached.
func (m *Manager) start(a *array.Array, n int, cfg ublk.Config, recover bool) (*served, error) {
	dev := DevicePath(n)
	st := a.Status()
	// The served array, once made (below): a spare may be activated
	// before, as soon as the dirty mark records a failed role.
	var sp atomic.Pointer[served]
	a.Configure(func() {
		a.OnMemberFailed = func(role int, path string) {
			// Called under the array's lock: log only (no Status call).
			m.log.Error("member failed", zap.String("device", dev), zap.String("array", st.Name), zap.String("uuid", st.UUID),
				zap.Int("role", role), zap.String("member", path), zap.Bool("degraded", true))
		}
		a.MemberTimeout = m.opts.Queue.MemberTimeout
		a.OnSpareActivated = func(role int, path string, err error) {
			if err != nil {
				m.log.Error("spare not activated", zap.String("device", dev), zap.Int("role", role), zap.String("spare", path), zap.Error(err))
				return
			}
			m.log.Warn("spare activated", zap.String("device", dev), zap.Int("role", role), zap.String("member", path))
			if s := sp.Load(); s != nil {
				// The status taken under m.mu: an add-spare recording
				// its device meanwhile (addToState, after the array
				// took it) is in it or comes after, never overwritten
				// by an older list.
				m.mu.Lock()
				st := a.Status()
				s.entry.Members = memberPaths(st)
				m.mu.Unlock()
				m.followWriteMostly(s, st)
			}
			// (Not served yet: its entry is made from the array as it
			// is then; this write keeps the state file's entries.)
			if err := m.saveState(); err != nil {
				m.log.Error("state file not written", zap.Error(err))
			}
		}
	})
	if recover {
		// Refused before the dirty mark is written: a device this array
		// cannot serve leaves the members as they were.
		if err := ublk.CheckRecover(m.ctrl, uint32(n), a); err != nil {
			a.Close()
			return nil, err
		}
	}
	if err := a.SetClean(false); err != nil {
		return nil, closeRefused(a, err)
	}
	cfg.Params = a.Params()
	var d *ublk.Device
	var err error
	if recover {
		d, err = ublk.Recover(m.ctrl, uint32(n), a, cfg)
	} else {
		d, err = createDevice(m.ctrl, a, cfg)
	}
	if err != nil {
		if !recover && !a.Created {
			a.SetClean(true)
		}
		return nil, closeRefused(a, err)
	}
	a.KeepCreated()
	info := d.Info()
	s := &served{n: int(d.ID()), a: a, d: d, created: a.Created, recovered: recover, since: time.Now(),
		entry: StateEntry{Number: int(d.ID()), UUID: st.UUID, Name: st.Name, Queues: int(info.NrHwQueues),
			Depth: int(info.QueueDepth), MaxIOBytes: int(info.MaxIOBufBytes)}}
	members := memberPaths(a.Status())
	m.mu.Lock() // (as the activation does)
	s.entry.Members = members
	m.mu.Unlock()
	sp.Store(s)
	m.log.Info("array live", zap.String("device", d.BlockPath()), zap.String("array", st.Name), zap.String("uuid", st.UUID),
		zap.String("level", st.Level), zap.String("layout", st.Layout), zap.Uint64("size_bytes", st.SizeBytes),
		zap.Strings("members", members), zap.Bool("created", a.Created), zap.Bool("recovered", recover),
		zap.Bool("degraded", st.Degraded), zap.Int("queues", int(info.NrHwQueues)))
	if bm := a.Bitmap; bm != nil {
		g := bm.Geometry()
		f := []zap.Field{zap.String("device", dev), zap.Int("regions", g.Regions), zap.Uint64("region_bytes", g.RegionSectors<<9)}
		if info := a.BitmapInfo; info != nil {
			f = append(f, zap.Int("dirty_regions", info.Dirty), zap.Int("never_written_regions", info.NeverWritten))
			if info.AllDirty {
				f = append(f, zap.NamedError("why", info.Err))
				m.log.Warn("bitmap unusable: every region dirty", f...)
			}
		}
		m.log.Info("bitmap", f...)
	}
	a.SetSyncLog(SyncLog(m.log.With(zap.String("device", dev))))
	a.StartBackground()
	return s, nil
}

// closeRefused closes a, whose device is not served, for err: a new
// array's creation is undone (its members as they were before the add);
// an undo that failed is said with err.
func closeRefused(a *array.Array, err error) error {
	if !a.Created {
		a.Close()
		return err
	}
	if uerr := a.CloseUndoCreated(); uerr != nil {
		return fmt.Errorf("%w; the members may hold part of the new array: %w", err, uerr)
	}
	return fmt.Errorf("%w (the members are as they were)", err)
}

// SyncLog is the log of an array's background jobs (Array.SetSyncLog) on
// log: serve's, and run's without a daemon. A job that left rows unreadable
// on more members than the parity covers (data lost there) logs at error
// level, as a failed one does.
func SyncLog(log *zap.Logger) func(msg string, r array.SyncReport, err error) {
	return func(msg string, r array.SyncReport, err error) {
		f := []zap.Field{zap.String("action", r.Kind), zap.Ints("targets", r.Targets),
			zap.Uint64("position_sectors", r.Position), zap.Uint64("synced_bytes", r.Synced<<9), zap.Uint64("skipped_bytes", r.Skipped<<9)}
		if r.Regions > 0 {
			f = append(f, zap.Int("regions_to_recover", r.Regions))
		}
		if r.Kind == "check" || r.Kind == "repair" {
			// md's unit, 512-byte sectors, as detail and the metric
			// (SyncReport counts 4 KiB blocks).
			f = append(f, zap.Uint64("mismatch_cnt", r.Mismatches*(4096/512)))
		}
		if r.ReadErrorsRewritten > 0 {
			f = append(f, zap.Uint64("read_errors_rewritten", r.ReadErrorsRewritten))
		}
		if r.LostRows > 0 {
			f = append(f, zap.Uint64("unreadable_rows", r.LostRows))
			if err == nil {
				log.Error(msg+" with unreadable rows: their data is lost", f...)
				return
			}
		}
		if err != nil {
			log.Error(msg, append(f, zap.Error(err))...)
			return
		}
		log.Info(msg, f...)
	}
}

// memberPaths are the devices of st (role holders, then spares) for the
// state file.
func memberPaths(st array.Status) []string {
	var out []string
	for _, mi := range st.Members {
		if mi.Path != "" {
			out = append(out, mi.Path)
		}
	}
	out = append(out, st.Spares...)
	if st.Activating != "" {
		out = append(out, st.Activating) // a spare taking a role: held
	}
	return out
}

// track adds s to the served arrays and watches its device: a device
// stopped from outside (a kernel-level delete) ends the array cleanly.
func (m *Manager) track(s *served) {
	m.mu.Lock()
	m.arrays[s.n] = s
	delete(m.pending, s.n)
	m.mu.Unlock()
	go func() {
		<-s.d.Done()
		m.ended(s)
	}()
}

// ended handles the end of s's queues, unless Delete, Shutdown or a grow
// took s out of the served arrays first: a device stopped from outside
// ends the array cleanly; one whose queues failed is recovered.
func (m *Manager) ended(s *served) {
	m.mu.Lock()
	mine := m.arrays[s.n] == s
	failed := mine && s.d.Failed()
	if mine {
		delete(m.arrays, s.n)
	}
	if failed {
		// In the state file throughout (saveState writes pending
		// entries too); handed over meanwhile: neither deleted nor
		// retried until recoverFailed has let the device go.
		m.pending[s.n] = s.entry
		m.growing[s.n] = true
	}
	m.mu.Unlock()
	if !mine {
		return // Delete or Shutdown took it
	}
	if failed {
		m.recoverFailed(s)
		return
	}
	m.log.Warn("device stopped outside the daemon; closing the array", zap.String("device", s.d.BlockPath()), zap.NamedError("queues", s.d.Err()))
	// As Delete: after the member operation under way, which would
	// otherwise write superblocks beside the clean mark and the close.
	s.opMu.Lock()
	_, err := m.stop(s, false)
	s.opMu.Unlock()
	if err != nil {
		m.log.Error("closing the array", zap.String("device", s.d.BlockPath()), zap.Error(err))
	}
	if err := m.saveState(); err != nil {
		m.log.Error("state file not written", zap.Error(err))
	}
	m.changed()
}

// putBack serves s again after an operation took it out of the served
// arrays and then changed nothing (a refused Delete, a grow whose state
// file write failed): its queues may have ended meanwhile, which its
// watcher, finding it gone, left alone.
func (m *Manager) putBack(s *served) {
	m.mu.Lock()
	m.arrays[s.n] = s
	m.mu.Unlock()
	m.endedMeanwhile(s)
}

// endedMeanwhile handles the end of s's queues (ended) if it came while s
// was out of the served arrays; s is back in them.
func (m *Manager) endedMeanwhile(s *served) {
	select {
	case <-s.d.Done():
		go m.ended(s)
	default:
	}
}

// recoverFailed hands the device of s, whose queues failed (ublk's
// Device.Failed: they all left and released the character device), to a
// recovery as after a crash of the daemon: the array is closed as it is
// (dirty: the writes in flight are reissued to the next server) and
// assembled again by the pending retries, which recover the device. Its
// users' requests wait meanwhile, as for a restart; stopping the device
// instead would fail a mounted filesystem's I/O. s is pending already,
// and marked handed over (growing) until its device is let go.
func (m *Manager) recoverFailed(s *served) {
	dev := s.d.BlockPath()
	m.log.Error("the device's queues failed: recovering it (its users' requests wait; the daemon retries until it serves again)",
		zap.String("device", dev), zap.NamedError("queues", s.d.Err()))
	// After the member operation under way (as Delete).
	s.opMu.Lock()
	if err := s.d.Detach(10 * time.Second); err != nil {
		// Recovery is refused while the device is live: the retries go on.
		m.log.Warn("the device is not yet left for recovery", zap.String("device", dev), zap.Error(err))
	}
	s.a.StopSync() // checkpointed: it resumes at the next assembly
	s.a.Close()
	s.opMu.Unlock()
	m.mu.Lock()
	delete(m.growing, s.n) // (handed over: del and the retries may act)
	m.mu.Unlock()
	releaseMemory()
	if err := m.saveState(); err != nil {
		m.log.Error("state file not written", zap.Error(err))
	}
	m.changed()
	go m.retryRecovery(s.n)
}

// stillServed is stop's error when the kernel refused to stop the device
// (ublk.ErrNotStopped) while its queues serve it: stop then changed
// nothing, and s is served as before.
type stillServed struct{ error }

func (e stillServed) Unwrap() error { return e.error }

// stop ends s: deletes (or, when the device is already going, stops) the
// device, marks the array clean and closes its members. A device the
// kernel refuses to stop and that is still served is left as it is
// (stillServed).
func (m *Manager) stop(s *served, del bool) (deleted bool, err error) {
	if del {
		err = s.d.Delete()
	} else {
		err = s.d.Stop()
	}
	if errors.Is(err, ublk.ErrNotStopped) {
		// Not stopped. For a del (Delete, Shutdown) nothing changes even
		// if its queues ended meanwhile (failed: Delete's putBack hands
		// that to ended, which recovers it; Shutdown leaves it to the
		// next daemon): a clean mark and a close here would strand the
		// requests the kernel still holds.
		select {
		case <-s.d.Done():
			if !del { // the watcher's: it ended, and is closed below
				break
			}
			return false, stillServed{err}
		default:
			return false, stillServed{err}
		}
	}
	if del {
		deleted = err == nil
		if err != nil && m.ctrl != nil {
			// A stop that failed (a queue's error) before DEL_DEV
			// succeeded: gone all the same.
			if exists, xerr := m.ctrl.Exists(uint32(s.n)); xerr == nil && !exists {
				deleted = true
			}
		}
	} else if errors.Is(err, unix.ENODEV) {
		err = nil
	}
	s.a.StopSync() // checkpointed: it resumes at the next assembly
	if cerr := s.a.SetClean(true); cerr != nil {
		err = errors.Join(err, fmt.Errorf("marking the array clean: %w", cerr))
	}
	s.a.Close()
	releaseMemory()
	if err == nil {
		m.log.Info("array stopped cleanly", zap.String("device", s.d.BlockPath()))
	}
	return deleted, err
}

// releaseMemory returns the memory of arrays that stopped to the OS a
// moment later, once nothing refers to them any more. A raid5/6 array's
// per-tag stripe buffers come to hundreds of MiB with a queue per CPU; Go
// returns freed memory to the OS only slowly, so an array assembled again
// in the same daemon (del and add, a grow's hand-over) stacked its
// buffers on the old ones' (a VM with 2 GiB ran out of memory).
func releaseMemory() {
	time.AfterFunc(time.Second, debug.FreeOSMemory)
}

func (m *Manager) changed() {
	if m.opts.OnChange == nil {
		return
	}
	m.mu.Lock()
	n := len(m.arrays)
	m.mu.Unlock()
	m.opts.OnChange(n)
}

// saveState writes the state file from the served and pending arrays.
func (m *Manager) saveState() error {
	if m.opts.StateFile == "" {
		return nil
	}
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	var st State
	m.mu.Lock()
	for _, s := range m.arrays {
		st.Arrays = append(st.Arrays, s.entry)
	}
	if m.stopping {
		// (A member operation that was under way when Shutdown began
		// ends now: its change is recorded, the arrays kept. arrays
		// holds only those put back since: a refused Delete.)
		for _, s := range m.stopped {
			if m.arrays[s.n] == nil {
				st.Arrays = append(st.Arrays, s.entry)
			}
		}
	}
	for _, s := range m.deleting {
		if m.arrays[s.n] == nil {
			st.Arrays = append(st.Arrays, s.entry)
		}
	}
	for _, e := range m.pending {
		st.Arrays = append(st.Arrays, e)
	}
	m.mu.Unlock()
	return writeState(m.opts.StateFile, st)
}

// driverFeatures asks the driver its features (a variable for tests;
// without a control device, as in tests without a driver: every one).
var driverFeatures = func(c *ublk.Control) (uint64, error) {
	if c == nil {
		return ^uint64(0), nil
	}
	return c.Features()
}

// devInfo is Control.DevInfo (a variable for tests; without a control
// device, as in tests without a driver: no device exists).
var devInfo = func(c *ublk.Control, id uint32) (ublk.DevInfo, error) {
	if c == nil {
		return ublk.DevInfo{}, unix.ENODEV
	}
	return c.DevInfo(id)
}

// createDevice is ublk.Create (a variable for tests: fault injection).
var createDevice = ublk.Create

// writeState is SaveState (a variable for tests).
var writeState = SaveState

// Add implements Backend.
func (m *Manager) Add(_ context.Context, req AddRequest) (Array, error) {
	spec, err := req.Spec()
	if err != nil {
		return Array{}, Invalid(err)
	}
	m.addMu.Lock()
	defer m.addMu.Unlock()
	if m.closed {
		return Array{}, Refused(errors.New("the daemon is stopping"))
	}
	n := -1
	if req.Number != nil {
		n = *req.Number
	}
	if n >= 0 {
		m.mu.Lock()
		_, taken := m.arrays[n]
		_, deleting := m.deleting[n]
		e, reserved := m.pending[n]
		m.mu.Unlock()
		switch {
		case taken:
			return Array{}, Refused(fmt.Errorf("%s already serves an array", DevicePath(n)))
		case deleting:
			return Array{}, Refused(fmt.Errorf("%s is being deleted: add it once the del ends", DevicePath(n)))
		case reserved:
			return Array{}, Refused(fmt.Errorf("%s is reserved for array %s of the state file, which did not start: `ublk-raid del -n %d` forgets it", DevicePath(n), e.UUID, n))
		}
	} else if n, err = m.firstFree(); err != nil {
		return Array{}, err
	}
	if req.Number != nil && n >= 0 && m.ctrl != nil {
		// Checked before the members are written (a new array's
		// superblocks): the device cannot be created over another.
		if exists, err := m.ctrl.Exists(uint32(n)); err != nil {
			return Array{}, err
		} else if exists {
			return Array{}, Refused(fmt.Errorf("%s exists already (served by another program: `ublk-raid list`)", DevicePath(n)))
		}
	}
	// Nor may the driver refuse the device for a feature it lacks
	// (--batch-io on a driver before 7.0) after a new array's
	// superblocks were written.
	feats, err := driverFeatures(m.ctrl)
	if err == nil {
		err = ublk.CheckFeatures(feats, m.config(n, req.Queues, req.Depth, req.MaxIOBytes))
	}
	if err != nil {
		return Array{}, Refused(err)
	}
	// An array served already, or kept pending for the state file, is
	// not assembled a second time (the same array at two numbers: their
	// data diverges), with --force or not: mdadm refuses a device of an
	// array already active.
	spec.Taken = func(uuid string, member *[16]byte) error { return m.taken(uuid, member, -1) }
	// A new array is undone if its device is refused (start).
	spec.Undoable = true
	// A raid5/6 write-hole log too small for the queues or the I/O size
	// is refused before anything is written.
	c := m.config(n, req.Queues, req.Depth, req.MaxIOBytes).Normalized()
	spec.Queues, spec.MaxIOBytes = c.Queues, c.MaxIOBytes
	a, err := array.Open(req.Members, spec, spec.Level >= 0)
	if err != nil {
		return Array{}, Refused(err)
	}
	if spec.Level >= 0 && !a.Created && a.Engine.Level() != spec.Level {
		a.Close()
		return Array{}, Refused(fmt.Errorf("the members hold a %s array; level %d would create a new one: wipe them first", a.Engine.Level(), spec.Level))
	}
	warnings := a.Warnings
	// The array is recorded, pending, before its device is created: a
	// daemon dying between the creation and the state file write after
	// it left a device no state file named (served by nobody, its number
	// taken until a reboot) while the members held the array. The next
	// daemon now recovers that device, or creates it if it never was.
	// (track, below, makes the entry a served one; a failure drops it.)
	st := a.Status()
	m.mu.Lock()
	m.pending[n] = StateEntry{Number: n, UUID: st.UUID, Name: st.Name, Members: memberPaths(st),
		Queues: req.Queues, Depth: req.Depth, MaxIOBytes: req.MaxIOBytes,
		WriteMostly: req.WriteMostly, WriteMostlyRoles: writeMostlyRoles(a.WriteMostly),
		SyncMinBytes: spec.SyncMinBytes, SyncMaxBytes: spec.SyncMaxBytes}
	m.mu.Unlock()
	if err := m.saveState(); err != nil {
		m.log.Error("state file not written", zap.Error(err)) // (trackAdded's write tells the user)
	}
	s, err := m.start(a, n, m.config(n, req.Queues, req.Depth, req.MaxIOBytes), false)
	if err != nil {
		m.mu.Lock()
		delete(m.pending, n)
		m.mu.Unlock()
		if serr := m.saveState(); serr != nil {
			m.log.Error("state file not written", zap.Error(serr))
		}
		if errors.Is(err, unix.EEXIST) {
			return Array{}, Refused(fmt.Errorf("%s exists already: %w", DevicePath(n), err))
		}
		return Array{}, err
	}
	m.mu.Lock() // (as in restore)
	s.entry.WriteMostly = req.WriteMostly
	s.entry.WriteMostlyRoles = writeMostlyRoles(a.WriteMostly)
	s.entry.SyncMinBytes, s.entry.SyncMaxBytes = spec.SyncMinBytes, spec.SyncMaxBytes
	m.mu.Unlock()
	if w := m.trackAdded(s); w != "" {
		warnings = append(warnings, w)
	}
	for _, w := range warnings {
		m.log.Warn(w, zap.String("device", DevicePath(s.n)))
	}
	v := m.view(s)
	v.Warnings = warnings
	return v, nil
}

// trackAdded serves s, started by Add, and records it in the state file.
// The array serves either way; a state file not written is the user's to
// know (a warning, not only the daemon's log): the daemon would not start
// the array again after a restart.
func (m *Manager) trackAdded(s *served) (warning string) {
	m.track(s)
	defer m.changed()
	if err := m.saveState(); err != nil {
		m.log.Error("state file not written", zap.Error(err))
		return fmt.Sprintf("%s serves, but the state file was not written (%v): a restarted daemon would not serve it; `ublk-raid add` its members again after fixing %s", DevicePath(s.n), err, m.opts.StateFile)
	}
	return ""
}

// taken refuses array uuid when the daemon serves it, or keeps it
// pending, at a number other than n; a device of it (member not nil) only
// if the served array still names that member.
func (m *Manager) taken(uuid string, member *[16]byte, n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.arrays {
		if k != n && s.a != nil && s.a.Status().UUID == uuid {
			if member != nil && !s.a.NamesMember(*member) {
				// A device the array no longer names (failed and
				// removed, replaced): free for other use, as md's.
				continue
			}
			return fmt.Errorf("array %s is served already as %s: its members are assembled once (fail, remove and re-add a member, or `ublk-raid del -n %d` first)", uuid, DevicePath(k), k)
		}
	}
	for k, s := range m.deleting {
		// (The entry's UUID: the array is closing, its locks held.)
		if k != n && s.entry.UUID == uuid {
			return fmt.Errorf("array %s is being deleted as %s: add it again once the del ends", uuid, DevicePath(k))
		}
	}
	for k, e := range m.pending {
		if k != n && e.UUID == uuid {
			return fmt.Errorf("array %s is the state file's %s, which did not start: `ublk-raid del -n %d` forgets it", uuid, DevicePath(k), k)
		}
	}
	return nil
}

// markWriteMostly marks the write-mostly roles of entry e in array a,
// assembled from it: the recorded roles, or in a state file written
// before they were, the roles of the recorded paths.
func markWriteMostly(a *array.Array, e StateEntry) error {
	if len(e.WriteMostlyRoles) == 0 {
		return setWriteMostly(a, e.WriteMostly)
	}
	var errs []error
	for _, r := range e.WriteMostlyRoles {
		if r < 0 || r >= a.Engine.MemberCount() {
			errs = append(errs, fmt.Errorf("write-mostly role %d: the array has roles 0..%d", r, a.Engine.MemberCount()-1))
			continue
		}
		a.WriteMostly |= 1 << uint(r)
	}
	return errors.Join(errs...)
}

// writeMostlyRoles are the roles of mask (Array.WriteMostly).
func writeMostlyRoles(mask uint64) []int {
	var roles []int
	for r := range 64 {
		if mask&(1<<uint(r)) != 0 {
			roles = append(roles, r)
		}
	}
	return roles
}

// setWriteMostly marks the roles of the members at paths write-mostly
// (before the device starts: queues copy the mask): a failed member's
// role too (Array.FailedRoleOf), which a spare or replacement takes over
// with the mark. A path it cannot place (absent) is reported and the
// others are still marked.
func setWriteMostly(a *array.Array, paths []string) error {
	var errs []error
	for _, p := range paths {
		r := a.RoleOf(p)
		if r < 0 {
			r = a.FailedRoleOf(p)
		}
		if r < 0 {
			errs = append(errs, fmt.Errorf("write-mostly %s: not a member of the array", p))
			continue
		}
		a.WriteMostly |= 1 << uint(r)
	}
	return errors.Join(errs...)
}

// firstFree is the lowest device number that is neither a kernel device
// nor reserved by a pending state entry. Called with addMu held.
func (m *Manager) firstFree() (int, error) {
	for n := 0; n < MaxDevice; n++ {
		m.mu.Lock()
		_, a := m.arrays[n]
		_, d := m.deleting[n]
		_, p := m.pending[n]
		m.mu.Unlock()
		if a || d || p {
			continue
		}
		exists, err := m.ctrl.Exists(uint32(n))
		if err != nil {
			return 0, err
		}
		if !exists {
			return n, nil
		}
	}
	return 0, errors.New("no free ublk device number")
}

func (m *Manager) view(s *served) Array {
	a := viewOf(s.n, s.a)
	info := s.d.Info()
	a.Queues, a.Depth = int(info.NrHwQueues), int(info.QueueDepth)
	a.UblkFlags = ublk.FlagNames(info.Flags)
	a.Created, a.Recovered, a.Since = s.created, s.recovered, s.since
	return a
}

// lockOp takes array n's operation lock and returns the array served
// then, with the unlock: an operation that waited for the lock while a
// grow assembled the array again must not act on the closed old one.
func (m *Manager) lockOp(n int) (*served, func(), error) {
	s, err := m.get(n)
	if err != nil {
		return nil, nil, err
	}
	s.opMu.Lock()
	if err := m.current(n, s); err != nil {
		s.opMu.Unlock()
		return nil, nil, err
	}
	return s, s.opMu.Unlock, nil
}

// current checks, under s.opMu, that s still serves array n (see lockOp).
func (m *Manager) current(n int, s *served) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.arrays[n] != s {
		return fmt.Errorf("%s was assembled again meanwhile (grow, or stopped): try again: %w", DevicePath(n), ErrNotFound)
	}
	return nil
}

func (m *Manager) get(n int) (*served, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.arrays[n]; s != nil {
		return s, nil
	}
	if m.growing[n] {
		return nil, errGrowing(n)
	}
	if _, ok := m.pending[n]; ok {
		return nil, fmt.Errorf("%s: the array of the state file did not start (see the daemon's log): %w", DevicePath(n), ErrNotFound)
	}
	return nil, fmt.Errorf("%s: no such array: %w", DevicePath(n), ErrNotFound)
}

// errGrowing refuses an operation on an array a grow is handing over.
func errGrowing(n int) error {
	return Refused(fmt.Errorf("%s: being handed over (a grow, or a recovery after its queues failed): try again when it ends", DevicePath(n)))
}

// Delete implements Backend. A device in use (mounted, or held by
// device-mapper, md or another exclusive opener) is refused, as mdadm
// --stop does.
func (m *Manager) Delete(n int) (DeleteResult, error) {
	m.mu.Lock()
	s := m.arrays[n]
	if s == nil && m.growing[n] {
		m.mu.Unlock()
		return DeleteResult{}, errGrowing(n)
	}
	if _, ok := m.deleting[n]; s == nil && ok {
		// Another del asks the kernel to stop it: not "no such array"
		// (the CLI would stop the device itself, behind the daemon),
		// and a refused stop serves it again.
		m.mu.Unlock()
		return DeleteResult{}, Refused(fmt.Errorf("%s is being deleted by another del: try again once that del ends", DevicePath(n)))
	}
	if s == nil {
		_, ok := m.pending[n]
		m.mu.Unlock()
		if !ok {
			return DeleteResult{}, fmt.Errorf("%s: no such array: %w", DevicePath(n), ErrNotFound)
		}
		return m.forgetPending(n)
	}
	m.mu.Unlock()
	// After the member operation under way (add-spare, re-add, replace,
	// the start of a check: none waits for long; a grow's hand-over
	// leaves another array here, taken again below): one that went on
	// after the stop marked the array clean would write superblocks
	// that say otherwise, and the next start would resync for nothing.
	// Those waiting behind find the array gone (lockOp).
	s.opMu.Lock()
	m.mu.Lock()
	if m.arrays[n] != s { // deleted, or assembled again, meanwhile
		m.mu.Unlock()
		s.opMu.Unlock()
		return m.Delete(n)
	}
	defer s.opMu.Unlock()
	inUseErr := Refused(fmt.Errorf("%s is in use (mounted, or held by another program): unmount it first", DevicePath(n)))
	if s.d.Info().Flags&ublk.FlagSafeStopDev == 0 && InUse(n) {
		m.mu.Unlock()
		return DeleteResult{}, inUseErr
	}
	delete(m.arrays, n)
	// (Still in the state file, written meanwhile by another operation,
	// until the stop is done: a refused one changes nothing.)
	m.deleting[n] = s
	m.mu.Unlock()
	putBack := func() {
		m.putBack(s)
		m.mu.Lock()
		delete(m.deleting, n)
		m.mu.Unlock()
	}
	// Where the driver can (7.0+), the kernel stops the device only if
	// nothing has it open, plain opens included: no window between a
	// check and the stop. Older drivers get the exclusive-open check
	// above.
	// A stop the kernel refuses otherwise (ublk.ErrNotStopped) changes
	// nothing either: the array stays served and in the state file.
	var stopErr error
	if err := s.d.StopUnused(); errors.Is(err, ublk.ErrInUse) {
		putBack()
		return DeleteResult{}, inUseErr
	} else if errors.Is(err, ublk.ErrNotStopped) {
		putBack()
		return DeleteResult{}, fmt.Errorf("deleting %s: %w", DevicePath(n), err)
	} else if !errors.Is(err, ublk.ErrNoSafeStop) {
		stopErr = err // stopped; m.stop deletes it
	}
	deleted, err := m.stop(s, true)
	if errors.As(err, new(stillServed)) {
		putBack()
		return DeleteResult{}, fmt.Errorf("deleting %s: %w", DevicePath(n), err)
	}
	m.mu.Lock()
	delete(m.deleting, n)
	m.mu.Unlock()
	err = errors.Join(stopErr, err)
	if serr := m.saveState(); serr != nil {
		err = errors.Join(err, serr)
	}
	m.changed()
	res := DeleteResult{}
	if deleted {
		// (The device is gone even if marking the array clean failed:
		// del --all lists it.)
		res.Deleted = []string{DevicePath(n)}
	}
	switch {
	case err != nil && deleted:
		return res, fmt.Errorf("%s deleted, but: %w", DevicePath(n), err)
	case err != nil:
		return res, fmt.Errorf("deleting %s: %w", DevicePath(n), err)
	}
	return res, nil
}

// forgetPending drops the pending entry n and deletes the device a dead
// server left waiting for its recovery (no live server holds it): once
// nothing retries the array, that device's users would wait for good. A
// waiting device that is mounted or otherwise held exclusively refuses
// the del before anything changes: the entry stays (its array can still
// be recovered, and the filesystem's writes with it). A device another
// live program serves is left alone.
//
// It waits for a RetryPending under way (addMu): one that had taken the
// entry before it was dropped would otherwise start the array after del
// reported it forgotten, and serve it again. If that retry started it, n
// is deleted as served.
func (m *Manager) forgetPending(n int) (DeleteResult, error) {
	// Asked outside addMu (it opens the block device), and the device
	// deleted outside it too: deleting waits for its last opener to let
	// go, which must hold up no add, retry or shutdown. A retry that
	// starts the array meanwhile takes the entry: it is deleted as
	// served then.
	waiting, err := m.waitingDevice(n)
	if err != nil {
		return DeleteResult{}, err
	}
	m.addMu.Lock()
	m.mu.Lock()
	_, ok := m.pending[n]
	delete(m.pending, n)
	m.mu.Unlock()
	if !ok {
		m.addMu.Unlock()
		return m.Delete(n) // started meanwhile, or forgotten by another del
	}
	m.log.Info("state entry forgotten", zap.String("device", DevicePath(n)))
	res := DeleteResult{Deleted: []string{}, Forgotten: []int{n}}
	err = m.saveState()
	m.addMu.Unlock()
	if waiting != nil {
		if derr := m.deleteWaiting(*waiting); derr != nil {
			err = errors.Join(err, fmt.Errorf("deleting %s: %w", DevicePath(n), derr))
		} else {
			res.Deleted = append(res.Deleted, DevicePath(n))
			m.log.Info("device deleted (it waited for the forgotten array)", zap.String("device", DevicePath(n)))
		}
	}
	return res, err
}

// waitingDevice returns the info of device n if it exists without a live
// server (left by a dead server for a recovery), nil if there is none or
// a live program serves it; an error if it cannot be deleted (in use) or
// asked about. It changes nothing.
func (m *Manager) waitingDevice(n int) (*ublk.DevInfo, error) {
	if m.ctrl == nil {
		return nil, nil
	}
	info, err := m.ctrl.DevInfo(uint32(n))
	switch {
	case errors.Is(err, unix.ENODEV):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %w", DevicePath(n), err)
	case info.Served():
		return nil, nil
	}
	// Its plain openers are requests waiting for good, not users to
	// protect (a reader blocked on it cannot close it; the kernel's stop
	// only while unused, 7.0+, would refuse for it forever): a mount or
	// another exclusive holder refuses, as on drivers without that stop.
	if info.State != ublk.StateDead && InUse(n) {
		return nil, Refused(fmt.Errorf("%s is in use (mounted, or held by another program): unmount it first; its array stays pending", DevicePath(n)))
	}
	return &info, nil
}

// deleteWaiting stops (its waiting requests fail) and deletes a device
// waitingDevice returned.
func (m *Manager) deleteWaiting(info ublk.DevInfo) error {
	if info.State != ublk.StateDead {
		if err := m.ctrl.StopDev(info.DevID); err != nil && !errors.Is(err, unix.ENODEV) {
			return err
		}
	}
	if err := m.ctrl.DelDev(info.DevID); err != nil && !errors.Is(err, unix.ENODEV) {
		return err
	}
	return nil
}

// DeleteAll implements Backend: it deletes every array not in use and
// forgets pending entries; devices in use are reported in the error.
func (m *Manager) DeleteAll() (DeleteResult, error) {
	m.mu.Lock()
	var ns []int
	for n := range m.arrays {
		ns = append(ns, n)
	}
	for n := range m.pending {
		ns = append(ns, n)
	}
	for n := range m.deleting {
		ns = append(ns, n) // refused while another del stops it
	}
	m.mu.Unlock()
	sort.Ints(ns)
	res := DeleteResult{Deleted: []string{}}
	var errs []error
	internal := false
	for _, n := range ns {
		r, err := m.Delete(n)
		// What a failed del did is still reported (a pending entry
		// forgotten whose state file write failed).
		res.Deleted = append(res.Deleted, r.Deleted...)
		res.Forgotten = append(res.Forgotten, r.Forgotten...)
		switch {
		case err == nil, errors.Is(err, ErrNotFound): // deleted meanwhile by another del
		default:
			errs = append(errs, err)
			internal = internal || statusOf(err) >= http.StatusInternalServerError
		}
	}
	err := errors.Join(errs...)
	switch {
	case err == nil:
		return res, nil
	case internal:
		// The daemon's own failure (state file, kernel) is not the
		// arrays' state refusing: say so, as del -n N does (whatever
		// the order of the failures).
		return res, &StatusError{http.StatusInternalServerError, err}
	}
	return res, Refused(err)
}

// InUse reports whether /dev/ublkbN is held: an exclusive open fails with
// EBUSY while a filesystem is mounted on it or device-mapper, md or
// another program holds it exclusively. (Plain opens, e.g. fio on the raw
// device, are not seen.)
func InUse(n int) bool {
	fd, err := unix.Open(DevicePath(n), unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return errors.Is(err, unix.EBUSY)
	}
	unix.Close(fd)
	return false
}

// List implements Backend.
func (m *Manager) List() []Array {
	m.mu.Lock()
	ss := make([]*served, 0, len(m.arrays))
	for _, s := range m.arrays {
		ss = append(ss, s)
	}
	// Arrays of the state file that did not start are listed inactive,
	// as /proc/mdstat lists an md array it could not run.
	var pending []StateEntry
	for n, e := range m.pending {
		if m.arrays[n] == nil && !m.growing[n] { // (not one a grow or recovery hands over)
			pending = append(pending, e)
		}
	}
	m.mu.Unlock()
	out := make([]Array, 0, len(ss)+len(pending))
	for _, s := range ss {
		out = append(out, m.view(s))
	}
	for _, e := range pending {
		out = append(out, pendingView(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// Detail implements Backend.
func (m *Manager) Detail(n int) (Array, error) {
	s, err := m.get(n)
	if err != nil {
		m.mu.Lock()
		e, pending := m.pending[n]
		growing := m.growing[n]
		m.mu.Unlock()
		if pending && !growing {
			// An array of the state file that did not start: described
			// inactive, as mdadm --detail describes one.
			return pendingView(e), nil
		}
		return Array{}, err
	}
	return m.view(s), nil
}

// role resolves a member given as a role number or a path.
func role(s *served, member string) (int, error) {
	disks := s.a.Engine.MemberCount()
	if r, err := strconv.Atoi(member); err == nil {
		if r < 0 || r >= disks {
			return 0, fmt.Errorf("role %d: %s has roles 0..%d: %w", r, DevicePath(s.n), disks-1, ErrNotFound)
		}
		return r, nil
	}
	if r := s.a.RoleOf(known(s, member)); r >= 0 {
		return r, nil
	}
	return 0, fmt.Errorf("%s is not a member of %s: %w", member, DevicePath(s.n), ErrNotFound)
}

// Fail implements Backend (mdadm --fail): the member is marked faulty in
// the survivors' superblocks before it returns.
func (m *Manager) Fail(n int, member string) (Array, error) {
	s, unlock, err := m.lockOp(n)
	if err != nil {
		return Array{}, err
	}
	defer unlock()
	r, err := role(s, member)
	if err != nil {
		if _, byRole := strconv.Atoi(member); byRole != nil {
			if fr, holder := s.a.FormerRoleOf(known(s, member)); fr >= 0 {
				// Failed already, and out: a spare (or a replace) took its
				// role. As md's fail of a faulty device: nothing to do.
				m.log.Info("fail of a member out of the array already", zap.String("device", DevicePath(n)), zap.Int("role", fr), zap.String("member", member), zap.String("holder", holder))
				return m.view(s), nil
			}
		}
		if _, byRole := strconv.Atoi(member); byRole != nil && slices.Contains(s.a.Spares(), known(s, member)) {
			// Not the role lookup's "not a member": the array lists it.
			return Array{}, Refused(fmt.Errorf("fail %s: it is a spare of %s and holds no data: `remove` takes it out", member, DevicePath(n)))
		}
		return Array{}, err
	}
	if _, byRole := strconv.Atoi(member); byRole == nil {
		err = s.a.Fail(r)
	} else {
		// Named by its path: that device, not a spare that took its role
		// since the lookup (the daemon may fail it meanwhile).
		err = s.a.FailDevice(r, known(s, member))
	}
	if err != nil {
		return Array{}, Refused(fmt.Errorf("fail %s: %w", member, err))
	}
	m.log.Info("member failed on request", zap.String("device", DevicePath(n)), zap.Int("role", r), zap.String("member", member))
	return m.view(s), nil
}

// Remove implements Backend (mdadm --remove): a faulty member's role
// becomes missing, or a spare stops being one; the device is closed and
// leaves the state file's member list (a later assembly does not read
// it).
func (m *Manager) Remove(n int, member string) (Array, error) {
	s, unlock, err := m.lockOp(n)
	if err != nil {
		return Array{}, err
	}
	// Held until the state file follows: a re-add or add-spare of the
	// device let go must not be recorded before its removal is.
	defer unlock()
	if sp := spareOf(s, member); sp != "" {
		err := s.a.RemoveSpare(sp)
		gone := !slices.Contains(s.a.Spares(), sp) && s.a.RoleOf(sp) < 0 // (not activated meanwhile)
		if err != nil {
			var serr error
			if gone {
				// Let go (closed) although the members' role tables may
				// still list it: a restart must not open it again (it
				// may be reused by then, and a device without this
				// array's superblock stops the assembly).
				serr = m.dropFromState(s, sp)
			}
			return Array{}, m.refusedAfter(s, fmt.Errorf("remove %s: %w", member, err), serr)
		}
		m.log.Info("spare removed", zap.String("device", DevicePath(n)), zap.String("member", sp))
		return m.answer(s, m.dropFromState(s, sp)), nil
	}
	r, err := role(s, member)
	if _, numErr := strconv.Atoi(member); err != nil && numErr != nil {
		// After a restart a failed member is not held (assembly leaves
		// it closed): its role is found from its superblock.
		if fr := s.a.FailedRoleOf(member); fr >= 0 {
			r, err = fr, nil
		} else if fr, holder := s.a.FormerRoleOf(known(s, member)); fr >= 0 {
			// Let go already: a spare (or a replace) took its role. As
			// md's remove of a faulty device, it succeeds; only the state
			// file may still name it.
			m.log.Info("remove of a member out of the array already", zap.String("device", DevicePath(n)), zap.Int("role", fr), zap.String("member", member), zap.String("holder", holder))
			return m.answer(s, m.dropFromState(s, known(s, member))), nil
		} else {
			var unheld []string
			for _, mi := range s.a.Status().Members {
				if mi.Path == "" && mi.State == "faulty" {
					unheld = append(unheld, strconv.Itoa(mi.Role))
				}
			}
			if len(unheld) > 0 {
				err = fmt.Errorf("%s is not held by %s (a failed member is left closed when the array starts): give the role number (faulty roles without a device: %s): %w",
					member, DevicePath(s.n), strings.Join(unheld, ", "), ErrNotFound)
			} else if i := slices.Index(s.a.Absent, CleanPath(member)); i >= 0 {
				// A path the start left out as absent (a spare pulled
				// while the daemon was down) with no role to remove:
				// only the state file still names it. Dropped, or it
				// stays there for good, and a new disk later at that
				// path (no superblock of the array) stops the next
				// start.
				m.log.Info("absent device removed from the state file", zap.String("device", DevicePath(n)), zap.String("member", s.a.Absent[i]))
				return m.answer(s, m.dropFromState(s, s.a.Absent[i])), nil
			} else if p := m.listedUnheld(s, member); p != "" {
				// Listed in the entry, held by the array in no role and
				// not as a spare, not a failed member: a device already
				// let go (a remove or replace whose daemon died before
				// its state file write; the remove repeated after a lost
				// answer). Only the state file still names it: dropped,
				// and the remove succeeds, as mdadm's remove of a device
				// already removed is harmless.
				m.log.Info("device the array no longer holds removed from the state file", zap.String("device", DevicePath(n)), zap.String("member", p))
				return m.answer(s, m.dropFromState(s, p)), nil
			}
		}
	}
	if err != nil {
		return Array{}, err
	}
	path := s.a.Status().Members[r].Path
	if err := s.a.Remove(r); err != nil {
		// Recorded although a member did not take it: the device was let
		// go, and the state file follows.
		gone := path != "" && s.a.RoleOf(path) < 0 && s.a.Status().Members[r].State == "missing"
		var serr error
		if gone {
			serr = m.dropFromState(s, path)
		}
		return Array{}, m.refusedAfter(s, fmt.Errorf("remove %s: %w", member, err), serr)
	}
	m.log.Info("member removed", zap.String("device", DevicePath(n)), zap.Int("role", r), zap.String("member", path))
	if path == "" {
		// The role had no device in this run: its member failed before
		// the array was assembled, which left it closed, and its path is
		// one of the state file's the array does not hold. Those are
		// dropped (stale members too: only re-add brings them back, and
		// it records them again), so that the next start does not need
		// the failed disk.
		return m.answer(s, m.dropUnheld(s)), nil
	}
	return m.answer(s, m.dropFromState(s, path)), nil
}

// dropUnheld removes from s's members in the state file the paths its
// array holds neither in a role nor as a spare. It returns the state
// file write's error (logged; the caller tells the user: answer,
// refusedAfter).
func (m *Manager) dropUnheld(s *served) error {
	held := memberPaths(s.a.Status())
	m.mu.Lock()
	var keep []string
	for _, p := range s.entry.Members {
		if slices.Contains(held, p) {
			keep = append(keep, p)
		}
	}
	s.entry.Members = keep
	s.entry.pruneWriteMostly()
	m.mu.Unlock()
	return m.saveStateFor(s)
}

// listedUnheld is the path among s's state file members that member names
// (any path to it) when s's array holds it neither in a role nor as a
// spare, or "".
func (m *Manager) listedUnheld(s *served, member string) string {
	m.mu.Lock()
	listed := slices.Clone(s.entry.Members)
	m.mu.Unlock()
	held := memberPaths(s.a.Status())
	p := CleanPath(member)
	for _, q := range listed {
		if q == p && !slices.Contains(held, q) {
			return q
		}
	}
	for _, q := range listed {
		if !slices.Contains(held, q) && sameDevice(p, q) {
			return q
		}
	}
	return ""
}

// spareOf is the spare of s that member names (any path to it), or "".
func spareOf(s *served, member string) string {
	p := known(s, member)
	for _, sp := range s.a.Spares() {
		if sp == p {
			return sp
		}
	}
	return ""
}

// loopsBack refuses path as a device of array n when it is n's own block
// device, or the device of another array served here that holds n's
// device, directly or through other arrays: the array's member I/O would
// go through the array itself, and its queues would wait on themselves.
// md refuses such a loop too (the block layer's holder links).
func (m *Manager) loopsBack(n int, path string) error {
	own := DevicePath(n)
	if sameDevice(path, own) {
		return Refused(fmt.Errorf("%s is the array's own device", path))
	}
	m.mu.Lock()
	var others []*served
	for k, s := range m.arrays {
		if k != n {
			others = append(others, s)
		}
	}
	m.mu.Unlock()
	// The arrays whose devices path leads to, through members.
	next := []string{path}
	seen := map[int]bool{}
	for len(next) > 0 {
		p := next[0]
		next = next[1:]
		for _, s := range others {
			if seen[s.n] || !sameDevice(p, DevicePath(s.n)) {
				continue
			}
			seen[s.n] = true
			st := s.a.Status()
			paths := st.Spares
			for _, mi := range st.Members {
				if mi.Path != "" {
					paths = append(paths, mi.Path)
				}
			}
			for _, q := range paths {
				if sameDevice(q, own) {
					return Refused(fmt.Errorf("%s is the device of array %s, which holds %s (through its members): a loop", path, DevicePath(s.n), own))
				}
				next = append(next, q)
			}
		}
	}
	return nil
}

// known is the path under which s's array holds the device or file that
// p names (a member's or a spare's: p may name it by another path, as
// AddRequest.Spec tells a device given twice), or p cleaned when the
// array holds no such device.
func known(s *served, p string) string {
	st := s.a.Status()
	paths := st.Spares
	for _, mi := range st.Members {
		if mi.Path != "" {
			paths = append(paths, mi.Path)
		}
	}
	for _, q := range paths {
		if q == p {
			return q
		}
	}
	for _, q := range paths {
		if sameDevice(p, q) {
			return q
		}
	}
	return CleanPath(p)
}

// dropFromState removes path from s's members in the state file. It
// returns the state file write's error (as dropUnheld).
func (m *Manager) dropFromState(s *served, path string) error {
	m.mu.Lock()
	var keep []string
	for _, p := range s.entry.Members {
		if p != path {
			keep = append(keep, p)
		}
	}
	s.entry.Members = keep
	s.entry.pruneWriteMostly()
	m.mu.Unlock()
	return m.saveStateFor(s)
}

// AddSpare implements Backend (mdadm --add): members become spares of
// array n (one may at once take a faulty or missing role and be
// rebuilt). Every device is checked before any is written: a refusal
// adds none.
func (m *Manager) AddSpare(n int, members []string, force bool) (Array, error) {
	if len(members) == 0 || slices.Contains(members, "") {
		if _, err := m.get(n); err != nil {
			return Array{}, err
		}
		return Array{}, Invalid(errors.New("add-spare needs the device"))
	}
	s, unlock, err := m.lockOp(n)
	if err != nil {
		return Array{}, err
	}
	defer unlock()
	// A device the array holds under another path is named as it holds
	// it, so that the array refuses it as a member or a spare already.
	paths := make([]string, len(members))
	for i, p := range members {
		paths[i] = known(s, p)
		if err := m.loopsBack(n, p); err != nil {
			return Array{}, fmt.Errorf("add spare %s: %w", p, err)
		}
	}
	m.joining(s, paths)
	err = s.a.AddSpares(paths, force)
	m.endJoining(s)
	if err != nil {
		// An error after every check passed (a write error) may leave
		// the devices before it added: the state file lists those, as
		// the array holds them, so that a restart opens them again.
		var serr error
		added := false
		for _, p := range paths {
			if slices.Contains(s.a.Spares(), p) || s.a.RoleOf(p) >= 0 {
				serr = cmp.Or(serr, m.addToState(s, p))
				added = true
			}
		}
		if !added {
			m.saveStateFor(s) // (Joining gone; a failure is only logged: nothing changed)
		}
		what := "add spare " + members[0]
		if len(members) > 1 {
			what = "add spares " + strings.Join(members, " ")
		}
		return Array{}, m.refusedAfter(s, fmt.Errorf("%s: %w", what, err), serr)
	}
	var serr error
	for _, p := range paths {
		m.log.Info("spare added", zap.String("device", DevicePath(n)), zap.String("member", p))
		serr = cmp.Or(serr, m.addToState(s, p))
	}
	return m.answer(s, serr), nil
}

// ReAdd implements Backend (mdadm --re-add): a member that left the array
// (failed, removed) returns to its role and is rebuilt; with a bitmap only
// the regions written while it was away are copied.
func (m *Manager) ReAdd(n int, member string) (Array, error) {
	s, unlock, err := m.lockOp(n)
	if err != nil {
		return Array{}, err
	}
	defer unlock()
	path := member
	if _, err := strconv.Atoi(member); err == nil {
		// As the other operations: a role the array does not have is not
		// found; one without a device (removed) is refused by the array's
		// state, not bad usage.
		r, err := role(s, member)
		if err != nil {
			return Array{}, err
		}
		mi := s.a.Status().Members[r]
		if path = mi.Path; path == "" {
			why := "removed"
			if mi.State == "faulty" {
				why = "faulty, its device left closed when the array started"
			}
			return Array{}, Refused(fmt.Errorf("re-add %s: role %d holds no device (%s): give the member's path", member, r, why))
		}
		if mi.State == "active" || mi.State == "rebuilding" {
			// Its device is in use: whatever left the role (a failed
			// disk a spare took it from) is named by its path.
			return Array{}, Refused(fmt.Errorf("re-add %s: role %d is %s, held by %s: nothing to re-add there; give the path of the device that left it", member, r, mi.State, mi.Path))
		}
	}
	path = known(s, path)
	if err := m.loopsBack(n, path); err != nil {
		return Array{}, fmt.Errorf("re-add %s: %w", member, err)
	}
	m.joining(s, []string{path})
	err = s.a.ReAdd(path)
	m.endJoining(s)
	if err != nil {
		m.saveStateFor(s) // (Joining gone; a failure is only logged)
		return Array{}, Refused(fmt.Errorf("re-add %s: %w", member, err))
	}
	m.log.Info("member re-added", zap.String("device", DevicePath(n)), zap.String("member", path))
	return m.answer(s, m.addToState(s, path)), nil
}

// Replace implements Backend: with puts a new device into member's role
// and rebuilds it. Everything is checked (the new device too) before an
// active member is failed (unlike md's hot replace, the array then runs
// with one copy less until the rebuild ends); a refusal changes nothing.
func (m *Manager) Replace(n int, member, with string, force bool) (Array, error) {
	s, unlock, err := m.lockOp(n)
	if err != nil {
		return Array{}, err
	}
	defer unlock()
	if with == "" {
		sp := s.a.Spares()
		if len(sp) == 0 {
			return Array{}, Refused(errors.New("replace: no spare; give --with NEW"))
		}
		with = sp[0]
	}
	with = known(s, with)
	if err := m.loopsBack(n, with); err != nil {
		return Array{}, fmt.Errorf("replace %s with %s: %w", member, with, err)
	}
	r, err := role(s, member)
	if _, numErr := strconv.Atoi(member); err != nil && numErr != nil {
		// After a restart a failed member is not held (assembly leaves
		// it closed): its role is found from its superblock, as remove
		// finds it.
		if fr := s.a.FailedRoleOf(member); fr >= 0 {
			r, err = fr, nil
		}
	}
	if err != nil {
		return Array{}, err
	}
	if s.a.RoleOf(with) == r {
		// MEMBER given as its role number names NEW (as the CLI
		// refuses it for a path).
		return Array{}, Invalid(fmt.Errorf("replace %s with %s: NEW is the device holding that role", member, with))
	}
	old := s.a.Status().Members[r]
	held := s.a.RoleOf(with) // (a refusal may name a member: not the new one)
	m.joining(s, []string{with})
	err = s.a.ReplaceMember(r, with, force)
	m.endJoining(s)
	if err != nil {
		// An error after the array began to change (a write error) may
		// have let the old member go and put the new one in: the state
		// file follows what the array holds. A refusal changed nothing,
		// and neither does the state file (a role whose failed member
		// this run does not hold has no write-mostly mark to follow).
		// (The new one recorded first: see below.)
		took := held != r && s.a.RoleOf(with) == r
		gone := old.Path != "" && s.a.RoleOf(old.Path) < 0 && !slices.Contains(s.a.Spares(), old.Path)
		if took || gone {
			m.followWriteMostly(s, s.a.Status())
		}
		var serr error
		if took {
			serr = m.addToState(s, with)
			if old.Path == "" {
				// The role is held again: the failed member's path goes,
				// as on success (see below), or nothing can drop it.
				serr = cmp.Or(serr, m.dropUnheld(s))
			}
		}
		if gone {
			serr = cmp.Or(serr, m.dropFromState(s, old.Path))
		}
		if !took && !gone {
			m.saveStateFor(s) // (Joining gone; a failure is only logged: nothing changed)
		}
		return Array{}, m.refusedAfter(s, fmt.Errorf("replace %s with %s: %w", member, with, err), serr)
	}
	m.log.Info("member replaced", zap.String("device", DevicePath(n)), zap.Int("role", r), zap.String("old", old.Path), zap.String("new", with))
	m.followWriteMostly(s, s.a.Status())
	// The new member recorded before the old one is dropped: a daemon
	// dying between the two writes leaves a state file naming both (the
	// restart leaves the stale old one out), not one naming neither,
	// which starts the array without its replacement.
	serr := m.addToState(s, with)
	if old.Path == "" {
		// The role had no device in this run (its member failed before
		// the array was assembled): the failed member's path is one of
		// the state file's the array does not hold, dropped as remove
		// drops it (see there).
		serr = cmp.Or(serr, m.dropUnheld(s))
	} else {
		serr = cmp.Or(serr, m.dropFromState(s, old.Path))
	}
	return m.answer(s, serr), nil
}

// followWriteMostly records as s's write-mostly members the paths that
// hold the roles its array reads write-mostly (Array.WriteMostly, a mask
// of roles). Unlike md, where the flag belongs to the device (a
// replacement has it only if added with --write-mostly), here it belongs
// to the role: a device put into the role (replace, spare activation)
// takes it over, in the state file too, so that a restart keeps it.
// (Saved with the member list by the caller.)
//
// A listed write-mostly path the array does not hold (an absent member,
// or a failed one whose role no device holds) keeps its mark: it is the
// role's until a device takes the role, and remove drops it with the
// path (pruneWriteMostly).
func (m *Manager) followWriteMostly(s *served, st array.Status) {
	var wm []string
	for _, mi := range st.Members {
		if mi.Path != "" && s.a.WriteMostly&(1<<uint(mi.Role)) != 0 {
			wm = append(wm, mi.Path)
		}
	}
	held := memberPaths(st)
	roles := writeMostlyRoles(s.a.WriteMostly)
	m.mu.Lock()
	for _, p := range s.entry.WriteMostly {
		if !slices.Contains(held, p) && slices.Contains(s.entry.Members, p) && !slices.Contains(wm, p) {
			wm = append(wm, p)
			if len(s.entry.WriteMostlyRoles) == 0 {
				// An entry written before roles were recorded: this
				// path (absent) may hold a role the mask does not
				// know. Its roles are not recorded until it is placed:
				// the next start reads the paths, as before.
				roles = nil
			}
		}
	}
	s.entry.WriteMostly = wm
	s.entry.WriteMostlyRoles = roles
	m.mu.Unlock()
}

// pruneWriteMostly drops from e's write-mostly paths those it no longer
// lists as members.
func (e *StateEntry) pruneWriteMostly() {
	e.WriteMostly = slices.DeleteFunc(e.WriteMostly, func(p string) bool { return !slices.Contains(e.Members, p) })
	if len(e.WriteMostly) == 0 {
		e.WriteMostly = nil
	}
}

// addToState records path among s's members in the state file. It
// returns the state file write's error (as dropUnheld).
//
// A listed path naming the same device (a failed member the array did
// not hold, re-added by another path) gives way to path: an entry naming
// one device twice makes the next start open it twice, and refuse.
func (m *Manager) addToState(s *served, path string) error {
	m.mu.Lock()
	listed := slices.Clone(s.entry.Members)
	m.mu.Unlock()
	var alias []string // (resolved outside m.mu: it stats the paths)
	for _, p := range listed {
		if p != path && sameDevice(p, path) {
			alias = append(alias, p)
		}
	}
	m.mu.Lock()
	var members []string
	placed := false
	for _, p := range s.entry.Members {
		if p == path || slices.Contains(alias, p) {
			if !placed {
				members = append(members, path)
				placed = true
			}
			continue
		}
		members = append(members, p)
	}
	if !placed {
		members = append(members, path)
	}
	var wm []string
	for _, w := range s.entry.WriteMostly {
		if slices.Contains(alias, w) {
			w = path
		}
		if !slices.Contains(wm, w) {
			wm = append(wm, w)
		}
	}
	s.entry.Members, s.entry.WriteMostly = members, wm
	m.mu.Unlock()
	return m.saveStateFor(s)
}

// saveStateFor writes the state file after a change to s's entry; a
// failure is logged and returned (the caller tells the user: answer,
// refusedAfter).
func (m *Manager) saveStateFor(s *served) error {
	err := m.saveState()
	if err != nil {
		m.log.Error("state file not written", zap.String("device", DevicePath(s.n)), zap.Error(err))
	}
	return err
}

// answer is the answer of a member operation on s that was done: with a
// warning when its state file write failed (err), as Add warns
// (trackAdded). The operation stands either way; the user must know
// that a restarted daemon would not see it.
func (m *Manager) answer(s *served, err error) Array {
	v := m.view(s)
	if err != nil {
		v.Warnings = append(v.Warnings, m.stateNotWritten(s, err))
	}
	return v
}

// refusedAfter is the error of a member operation on s that failed after
// the array changed (err), whose state file write failed too (serr: nil
// if it did not).
func (m *Manager) refusedAfter(s *served, err, serr error) error {
	if serr != nil {
		err = fmt.Errorf("%w; and %s", err, m.stateNotWritten(s, serr))
	}
	return Refused(err)
}

// stateNotWritten tells that the state file does not record the change
// just made to s's array (a write error).
func (m *Manager) stateNotWritten(s *served, err error) string {
	return fmt.Sprintf("%s changed, but the state file was not written (%v): a restarted daemon would assemble the array from the members recorded before, and may not start it; after fixing %s, the next state file write (add, del or a member operation) records the change",
		DevicePath(s.n), err, m.opts.StateFile)
}

// Check implements Backend: start reading every copy and counting
// mismatches.
func (m *Manager) Check(n int) (Array, error) { return m.scrub(n, false) }

// Repair implements Backend: like Check, rewriting mismatches from the
// chosen copy.
func (m *Manager) Repair(n int) (Array, error) { return m.scrub(n, true) }

func (m *Manager) scrub(n int, repair bool) (Array, error) {
	s, unlock, err := m.lockOp(n) // not while a grow hands the array over
	if err != nil {
		return Array{}, err
	}
	defer unlock()
	if err := s.a.Check(repair); err != nil {
		return Array{}, Refused(err)
	}
	return m.view(s), nil
}

// Grow implements Backend, like mdadm --grow --size: every check first
// (array.GrowCheck on the serving array, and UBLK_F_UPDATE_SIZE on the
// device), nothing written if one refuses. Then the device is handed
// over as after a daemon crash: the queues let go of it (its requests
// wait in the kernel), the array is closed and assembled again, grown
// (bitmap, then superblocks, durably), re-attached by user recovery
// (requests in flight reissued) and finally the kernel is told the new
// size (UBLK_U_CMD_UPDATE_SIZE). The re-assembly resyncs the regions the
// bitmap held dirty, as after a crash (without a bitmap, the whole
// array). A failure after the hand-over began still re-attaches the
// array, at whatever size its superblocks say.
func (m *Manager) Grow(n int, sizeBytes uint64) (Array, error) {
	s, unlock, err := m.lockOp(n)
	if err != nil {
		return Array{}, err
	}
	defer unlock()
	if sizeBytes != 0 && sizeBytes < 4096 {
		// sizeBytes>>9 would be 0, which GrowCheck takes as max.
		return Array{}, Invalid(fmt.Errorf("size %d bytes: 0 (max) or at least 4096", sizeBytes))
	}
	p, err := s.a.GrowCheck(sizeBytes>>9, true)
	if errors.Is(err, array.ErrGrowNoChange) {
		if s.entry.GrowFromSectors != 0 {
			// An earlier grow whose UPDATE_SIZE failed: the array has
			// the size, the device not yet.
			if err := s.d.UpdateSize(s.a.Params().Basic.DevSectors); err != nil {
				return Array{}, fmt.Errorf("%s: the array has that size, the kernel still does not take it: %w", DevicePath(n), err)
			}
			m.mu.Lock()
			s.entry.GrowFromSectors = 0
			m.mu.Unlock()
			return m.answer(s, m.saveState()), nil
		}
		return m.view(s), nil
	}
	if err != nil {
		return Array{}, Refused(fmt.Errorf("%s: %w", DevicePath(n), err))
	}
	if !s.d.CanUpdateSize() {
		return Array{}, Refused(fmt.Errorf("%s: %w; nothing changed", DevicePath(n), ublk.ErrNoUpdateSize))
	}
	m.addMu.Lock() // no Add takes the number meanwhile, no Shutdown
	defer m.addMu.Unlock()
	if m.closed {
		return Array{}, Refused(errors.New("the daemon is shutting down"))
	}
	m.mu.Lock()
	if m.arrays[n] != s {
		m.mu.Unlock()
		return Array{}, fmt.Errorf("%s: no such array: %w", DevicePath(n), ErrNotFound)
	}
	// Until the kernel takes the grown size, the state file records the
	// size the device had (a restarted daemon finishes the grow only on a
	// device of exactly that size), and keeps the array as pending: other
	// state file writes meanwhile must not drop it.
	e := s.entry
	prevFrom := e.GrowFromSectors
	if prevFrom == 0 {
		// The device's size (the array's, but after a grow whose
		// UPDATE_SIZE failed: then the record is kept).
		e.GrowFromSectors = p.OldArraySectors
		if dp, err := m.ctrl.GetParams(s.d.Info().DevID); err == nil {
			e.GrowFromSectors = dp.Basic.DevSectors
		}
	}
	delete(m.arrays, n) // its watcher leaves it to us
	m.pending[n] = e
	m.growing[n] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.growing, n)
		m.mu.Unlock()
	}()
	if err := m.saveState(); err != nil {
		m.mu.Lock()
		delete(m.pending, n)
		m.arrays[n] = s // (at once: a state file written meanwhile keeps it)
		m.mu.Unlock()
		m.endedMeanwhile(s)
		return Array{}, fmt.Errorf("%s: state file not written, nothing changed: %w", DevicePath(n), err)
	}
	dev := DevicePath(n)
	m.log.Info("grow: handing the device over", zap.String("device", dev), zap.Uint64("from_bytes", p.OldArraySectors<<9), zap.Uint64("to_bytes", p.NewArraySectors<<9))
	var errs []error
	detached := true
	if err := s.d.Detach(10 * time.Second); err != nil {
		// The array is re-attached below, but not grown: the device
		// may not have let go of every request.
		errs = append(errs, fmt.Errorf("detach: %w", err))
		detached = false
	}
	s.a.StopSync()
	record := s.a.SyncRecord() // (the last check's result and mismatch_cnt, kept as md keeps them)
	s.a.Close()
	defer releaseMemory() // (once this call no longer holds s)
	// pendingAgain leaves the array pending, retried until it starts.
	pendingAgain := func(what string, err error) (Array, error) {
		m.mu.Lock()
		m.pending[n] = e
		m.mu.Unlock()
		m.changed()
		go m.retryRecovery(n)
		return Array{}, errors.Join(append(errs, fmt.Errorf("%s: %s (the daemon keeps retrying): %w", dev, what, err))...)
	}
	a, err := openRetry(e.Members, m.growSpec(e))
	if err != nil {
		return pendingAgain("the array could not be assembled again", err)
	}
	a.CarrySyncRecord(record)
	if len(a.Absent) > 0 {
		m.log.Warn("members absent, or holding no superblock of the array: the array starts without them (its superblocks record them failed, missing or spare)",
			zap.String("device", dev), zap.String("uuid", e.UUID), zap.Strings("absent", a.Absent))
	}
	if err := markWriteMostly(a, e); err != nil {
		m.log.Warn("write-mostly member not in the array", zap.Error(err))
	}
	gerr := errors.New("not grown: the hand-over failed")
	if detached {
		_, gerr = a.Grow(p.NewMemberSectors)
	}
	if gerr != nil {
		errs = append(errs, fmt.Errorf("grow: %w", gerr))
	}
	ns, err := m.start(a, n, m.config(n, e.Queues, e.Depth, e.MaxIOBytes), true)
	if err != nil {
		return pendingAgain("not re-attached", err)
	}
	// The entry keeps what a restart keeps (restore): the paths the
	// array holds and those of its absent or failed members, which a
	// later remove drops.
	held := entryMembers(a, e.Members)
	m.mu.Lock() // (the spare-activation callback writes ns.entry too)
	ns.entry = e
	ns.entry.Members = held
	ns.entry.pruneWriteMostly()
	if gerr != nil {
		ns.entry.GrowFromSectors = prevFrom // not grown: as before it
	}
	m.mu.Unlock()
	m.followWriteMostly(ns, a.Status()) // (as restore: a spare activated at the start)
	m.track(ns)
	if gerr == nil {
		if err := ns.d.UpdateSize(a.Params().Basic.DevSectors); err != nil {
			errs = append(errs, fmt.Errorf("the superblocks hold the new size but the kernel did not take it (the next restart of the daemon retries): %w", err))
		} else {
			m.mu.Lock()
			ns.entry.GrowFromSectors = 0
			m.mu.Unlock()
			m.log.Info("array grown", zap.String("device", dev), zap.Uint64("size_bytes", a.Params().Basic.DevSectors<<9))
		}
	}
	serr := m.saveState()
	m.changed()
	if len(errs) > 0 {
		if serr != nil {
			errs = append(errs, errors.New(m.stateNotWritten(ns, serr)))
		}
		return m.view(ns), errors.Join(errs...)
	}
	return m.answer(ns, serr), nil
}

// growSpec is how a grow assembles array e again after the hand-over: as
// a restart does (restoreSpec). The entry's member list is the one a
// restart reads, and may hold a path that is gone (a spare or failed
// member pulled while the daemon was down: restore left it out and kept
// it in the entry); an assembly that opened every path would fail on it
// after the device was handed over, where the array it just served
// assembles without it.
func (m *Manager) growSpec(e StateEntry) array.CreateSpec { return m.restoreSpec(e) }

// retryRecovery retries the pending arrays (RetryPending) every
// pendingRetryEvery until array n is started or the daemon shuts down: a device
// a grow handed over and could not take back waits, with its users' I/O,
// for this.
func (m *Manager) retryRecovery(n int) {
	for {
		time.Sleep(pendingRetryEvery)
		m.RetryPending()
		m.mu.Lock()
		_, waiting := m.pending[n]
		m.mu.Unlock()
		m.addMu.Lock()
		closed := m.closed
		m.addMu.Unlock()
		if !waiting || closed {
			return
		}
	}
}

// Shutdown ends serving. With keep, every device is left to a new daemon
// to recover (as after a crash). Otherwise each device is deleted and its
// array marked clean, except devices in use (see inUse), which are left
// for recovery because deleting them would fail their users' I/O. The
// state file keeps every array either way (a later serve starts them
// again). The Manager must not be used afterwards.
func (m *Manager) Shutdown(keep bool) {
	m.addMu.Lock()
	m.closed = true
	m.mu.Lock()
	m.stopping = true
	ss := make([]*served, 0, len(m.arrays))
	for _, s := range m.arrays {
		ss = append(ss, s)
	}
	m.stopped = ss
	clear(m.arrays)
	m.mu.Unlock()
	// Released before the operation locks are taken: a grow holds its
	// array's and then waits for addMu (it then finds the daemon closed).
	m.addMu.Unlock()
	for _, s := range ss {
		// As Delete: after the member operation under way, so that none
		// writes superblocks after the stop marked the array clean.
		s.opMu.Lock()
		switch {
		case keep:
			m.log.Info("leaving the device for the next daemon to recover", zap.String("device", s.d.BlockPath()))
		default:
			// As Delete: the kernel refuses to stop a device in use
			// where it can (7.0+), the exclusive-open check elsewhere.
			err := s.d.StopUnused()
			if errors.Is(err, ublk.ErrInUse) || errors.Is(err, ublk.ErrNoSafeStop) && InUse(s.n) {
				m.log.Warn("device in use: leaving it for the next daemon to recover", zap.String("device", s.d.BlockPath()))
				s.opMu.Unlock()
				continue
			}
			if errors.Is(err, ublk.ErrNotStopped) {
				m.refusedStop(s, err)
				continue
			}
			if errors.Is(err, ublk.ErrNoSafeStop) {
				err = nil
			}
			_, serr := m.stop(s, true)
			if errors.As(serr, new(stillServed)) {
				m.refusedStop(s, serr)
				continue
			}
			if err = errors.Join(err, serr); err != nil {
				m.log.Error("deleting the device", zap.String("device", s.d.BlockPath()), zap.Error(err))
			}
		}
		s.opMu.Unlock()
	}
}

// refusedStop is Shutdown's answer to a device the kernel refused to
// stop: it is left, its array open and dirty, as for keep; the daemon's
// exit then leaves it to the next daemon to recover. s.opMu is released.
func (m *Manager) refusedStop(s *served, err error) {
	m.log.Error("the kernel refused to stop the device: leaving it for the next daemon to recover",
		zap.String("device", s.d.BlockPath()), zap.Error(err))
	s.opMu.Unlock()
}

// Snapshot implements metrics.Source: each array's state, sync, bitmap,
// member and queue counters; a state file entry that has not started
// (pending: members missing, or a grow handing its device over) as
// inactive, as md's /proc/mdstat shows an array it could not run.
func (m *Manager) Snapshot() []metrics.ArrayStats {
	m.mu.Lock()
	ss := make([]*served, 0, len(m.arrays))
	for _, s := range m.arrays {
		ss = append(ss, s)
	}
	var out []metrics.ArrayStats
	for n, e := range m.pending {
		if _, ok := m.arrays[n]; !ok {
			out = append(out, metrics.ArrayStats{Device: filepath.Base(DevicePath(n)), Name: e.Name, State: metrics.ArrayInactive})
		}
	}
	m.mu.Unlock()
	for _, s := range ss {
		st := s.a.Metrics(filepath.Base(DevicePath(s.n)))
		st.UblkFlags = ublk.FlagNames(s.d.Info().Flags)
		out = append(out, st)
	}
	return out
}
