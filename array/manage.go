package array

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
)

// MemberInfo is one role of the array as Status reports it.
type MemberInfo struct {
	Role  int    `json:"role"`
	Path  string `json:"path,omitempty"` // empty when the role has no device
	State string `json:"state"`          // active, rebuilding, faulty, missing
	// RebuildOffset is, for a rebuilding member, how far (bytes of its
	// data area) it holds current data.
	RebuildOffset uint64 `json:"rebuild_offset_bytes,omitempty"`
}

// Status is a point-in-time description of the array (for detail, list
// and metrics). Safe to call from any goroutine.
type Status struct {
	Name         string       `json:"name"`
	UUID         string       `json:"uuid"`
	Level        string       `json:"level"`
	Layout       string       `json:"layout,omitempty"`
	ChunkBytes   uint64       `json:"chunk_bytes"`
	SizeBytes    uint64       `json:"size_bytes"`
	RaidDisks    int          `json:"raid_disks"`
	State        string       `json:"state"` // clean/active, degraded, failed
	Degraded     bool         `json:"degraded"`
	Events       uint64       `json:"events"`
	Members      []MemberInfo `json:"members"`
	ActiveDisks  int          `json:"active_disks"`
	FailedDisks  int          `json:"failed_disks"`
	MissingDisks int          `json:"missing_disks"`
	// Spares are the devices standing by to take a failed role.
	Spares []string `json:"spares"`
	// Activating is a spare being put into a failed role now (no longer
	// among Spares, not yet among Members), or "".
	Activating string `json:"activating,omitempty"`
	SpareDisks int    `json:"spare_disks"`
}

// Status describes the array now.
func (a *Array) Status() Status {
	ea := a.Engine
	st := a.Engine.State()
	a.mu.Lock()
	events := a.events
	var sb *engine.Superblock
	for _, s := range a.SBs {
		if s != nil {
			c := *s // superblock writes update it in place, under a.mu
			sb = &c
			break
		}
	}
	paths := make([]string, len(a.Members))
	for r, m := range a.Members {
		if m != nil {
			paths[r] = m.Path
		}
	}
	spares := make([]string, 0, len(a.spares))
	for _, sp := range a.spares {
		spares = append(spares, sp.m.Path)
	}
	activating := ""
	if a.activating != nil {
		activating = a.activating.Path
	}
	a.mu.Unlock()
	s := Status{Level: ea.Level().String(), ChunkBytes: ea.ChunkSectors() << 9, SizeBytes: ea.ArraySectors() << 9,
		RaidDisks: ea.MemberCount(), Events: events, Spares: spares, SpareDisks: len(spares), Activating: activating}
	switch {
	case ea.Parity != nil:
		s.Layout = ea.Parity.Layout.String()
	case ea.Geo.Level == engine.Level10:
		s.Layout = ea.Geo.Layout.String()
	}
	if sb != nil {
		s.Name = sb.Name
		s.UUID = engine.UUIDString(sb.ArrayUUID)
	}
	for r, m := range st.Members {
		mi := MemberInfo{Role: r, Path: paths[r], State: m.State.String()}
		switch m.State {
		case engine.MemberActive:
			s.ActiveDisks++
		case engine.MemberRebuilding:
			mi.RebuildOffset = m.RebuildOffset << 9
		case engine.MemberFaulty:
			s.FailedDisks++
		case engine.MemberMissing:
			s.MissingDisks++
		}
		s.Members = append(s.Members, mi)
	}
	s.Degraded = s.ActiveDisks < ea.MemberCount()
	switch {
	case !geometryCovered(a.Engine):
		s.State = "failed"
	case a.Engine.Broken():
		// A raid0 a member's failed write broke, in memory (md's
		// array_state "broken"): writes fail, reads go on.
		s.State = "broken"
	case s.Degraded:
		s.State = "degraded"
	default:
		s.State = "active"
	}
	return s
}

// RoleOf returns the role of the member whose path is p, or -1.
func (a *Array) RoleOf(p string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for r, m := range a.Members {
		if m != nil && m.Path == p {
			return r
		}
	}
	return -1
}

// FailedRoleOf returns the faulty role, held by no device in this run,
// whose member is the device at path (its superblock, read here, names
// this array and that role, and the role table names its member UUID),
// or -1. Assembly leaves a failed member closed: this finds its role by
// the path it had.
func (a *Array) FailedRoleOf(path string) int {
	sb, ref := a.memberSBAt(path)
	if sb == nil {
		return -1
	}
	r := int(sb.Role)
	a.mu.Lock()
	held := a.Members[r] != nil
	a.mu.Unlock()
	if held || a.Engine.State().Members[r].State != engine.MemberFaulty || ref.Roles[r].Member != sb.MemberUUID {
		return -1
	}
	return r
}

// memberSBAt reads the superblock of the device at path, and returns it
// with the array's reference superblock when it names this array and one
// of its roles (not a spare); else nil.
func (a *Array) memberSBAt(path string) (sb, ref *engine.Superblock) {
	// Only a block device or a regular file: the caller holds the
	// array's operation lock, and a path naming a FIFO (or another
	// special file) may block an open.
	if fi, err := os.Stat(path); err != nil || !(fi.Mode().IsRegular() || fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0) {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, nil
	}
	sb, _, err = engine.ReadSuperblock(func(off int64, n int) ([]byte, error) {
		b := make([]byte, n)
		_, err := f.ReadAt(b, off)
		return b, err
	}, size)
	ref = a.refSB()
	if err != nil || ref == nil || sb.ArrayUUID != ref.ArrayUUID || sb.IsSpare() || int(sb.Role) >= a.Engine.MemberCount() {
		return nil, nil
	}
	return sb, ref
}

// FormerRoleOf returns the role the device at path held and another
// device holds since (a spare took it when the array failed this one, or
// a replace), with that device's path, or -1: its superblock names this
// array and the role, which the role table gives another member now.
// The array let it go (closed it): for md it is still a faulty device of
// the array until removed, whose fail and remove answer 0.
func (a *Array) FormerRoleOf(path string) (int, string) {
	sb, ref := a.memberSBAt(path)
	if sb == nil {
		return -1, ""
	}
	r := int(sb.Role)
	a.mu.Lock()
	holder := a.Members[r]
	a.mu.Unlock()
	if holder == nil || holder.Path == path || ref.Roles[r].Member == sb.MemberUUID {
		return -1, ""
	}
	return r, holder.Path
}

// Fail marks member role faulty (like mdadm --fail) and records it in the
// surviving members' superblocks before returning. Failing the last copy
// of some data is refused: the array would lose data.
func (a *Array) Fail(role int) error {
	if n := a.Engine.MemberCount(); role < 0 || role >= n {
		return fmt.Errorf("role %d: the array has roles 0..%d", role, n-1)
	}
	m := a.Engine.State().Members[role]
	if m.State == engine.MemberFaulty {
		// As asked (md's md_error of a Faulty device does nothing and
		// SET_DISK_FAULTY answers 0): a retried fail, or one after the
		// daemon failed the member on an I/O error, is not refused. It
		// returns once the failure is recorded, as a first fail does
		// (nothing is written if it is already).
		if err := a.persist(a.Engine.State()); err != nil {
			return err
		}
		a.mu.Lock()
		fm, ok := a.unmarked[role]
		delete(a.unmarked, role)
		held := ok && a.Members[role] == fm.dev
		a.mu.Unlock()
		if held {
			// A fail by hand whose record failed, retried: its own
			// superblock is marked now, as the first would have.
			a.markFailed(role, fm.dev, &fm.own)
		}
		return nil
	}
	if m.State == engine.MemberMissing {
		return fmt.Errorf("role %d is already %s", role, m.State)
	}
	a.mu.Lock()
	dev := a.Members[role]
	var own engine.Superblock // dev's, copied now: a spare may take the role
	if dev != nil && a.SBs[role] != nil {
		own = *a.SBs[role]
	}
	a.mu.Unlock()
	// The check and the change in one step: two Fails at once cannot
	// both pass the check and fail the array between them. A raid0
	// member always holds the only copy of its chunks, so it is refused
	// too (md answers EBUSY): recorded, the failure would leave an array
	// that does not assemble, even with --force.
	st, changed, ok := a.Engine.FailRedundant(role)
	if !ok {
		if a.Engine.Level() == engine.Level0 {
			return fmt.Errorf("role %d holds the only copy of its chunks: a raid0 array has no redundancy, failing it would fail the array", role)
		}
		return fmt.Errorf("role %d holds the last copy of some data: failing it would fail the array", role)
	}
	if !changed {
		return nil
	}
	if err := a.persist(st); err != nil {
		if dev != nil && m.State == engine.MemberActive {
			// Faulty in memory, not recorded: a retried fail records it
			// and marks the member's own superblock then.
			a.mu.Lock()
			if a.unmarked == nil {
				a.unmarked = map[int]failMark{}
			}
			a.unmarked[role] = failMark{dev: dev, own: own}
			a.mu.Unlock()
		}
		return err
	}
	if dev != nil && m.State == engine.MemberActive {
		// (A member failed while being rebuilt keeps its superblock
		// saying so: a re-add must rebuild it in full.)
		a.markFailed(role, dev, &own)
	}
	return nil
}

// failMark is a member failed by hand whose failure was not recorded, and
// its superblock before the fail (see markFailed).
type failMark struct {
	dev *Member
	own engine.Superblock
}

// FailDevice is Fail of the device at path, a no-op if it no longer holds
// role: named by its path, a member the daemon failed meanwhile may have
// been replaced by a spare, which the user did not name (and must not
// fail). Serialised with spare activation, as Remove.
func (a *Array) FailDevice(role int, path string) error {
	if n := a.Engine.MemberCount(); role < 0 || role >= n {
		return fmt.Errorf("role %d: the array has roles 0..%d", role, n-1)
	}
	a.spareMu.Lock()
	defer a.spareMu.Unlock()
	a.mu.Lock()
	now := a.Members[role]
	a.mu.Unlock()
	if now == nil || now.Path != path {
		// Failed by the array meanwhile and let go (a spare took the
		// role): out already, as asked; md's fail of a faulty device
		// answers 0 (Fail of a faulty role, FormerRoleOf).
		return nil
	}
	return a.Fail(role)
}

// removeDrain is how long Remove waits for the operations out on a
// device before refusing it as busy.
var removeDrain = 2 * time.Second

// Remove takes a faulty member out of the array (like mdadm --remove): its
// role becomes missing in the superblocks and the device is closed (free
// for other users: mdadm --zero-superblock, a new array). An active member
// must be failed first.
func (a *Array) Remove(role int) error {
	if n := a.Engine.MemberCount(); role < 0 || role >= n {
		return fmt.Errorf("role %d: the array has roles 0..%d", role, n-1)
	}
	// A spare activation (started by the failure being removed) puts the
	// spare in the role and only then marks it rebuilding: checked
	// between the two, the role would still look faulty, and the removal
	// would mark it missing and close the spare. Serialised with it (and
	// with addMember), the check sees the role as the activation left it.
	a.mu.Lock()
	was := a.Members[role]
	a.mu.Unlock()
	a.spareMu.Lock()
	defer a.spareMu.Unlock()
	a.mu.Lock()
	now := a.Members[role]
	a.mu.Unlock()
	st := a.Engine.State()
	switch st.Members[role].State {
	case engine.MemberFaulty:
	case engine.MemberMissing:
		return fmt.Errorf("role %d is already removed", role)
	default:
		if now != was && now != nil {
			// Not "fail it first": that would fail the spare.
			return fmt.Errorf("a spare (%s) took role %d meanwhile: the member that held it is out of the array already", now.Path, role)
		}
		return fmt.Errorf("role %d is %s: fail it first", role, st.Members[role].State)
	}
	if m := now; m != nil && !lateOn(m) && m.busy() {
		// Operations of a healthy device return in moments (a fail
		// followed at once by remove, as mdadm retries a remove the
		// kernel answers EBUSY): a little wait before refusing.
		for deadline := time.Now().Add(removeDrain); m.busy() && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond)
		}
	}
	if m := now; m != nil && (lateOn(m) || m.busy()) {
		// md refuses to remove a device with I/O pending (EBUSY): a
		// removed device is closed, free for other users, and a late
		// write could land over what they put there, or, re-added, over
		// what the array wrote to it since.
		return fmt.Errorf("role %d: I/O is still out on %s (a hung device: given up after the member timeout, or not yet): it can be removed once the device answers (replace can put another device in the role meanwhile)", role, m.Path)
	}
	prev := st.Members[role]
	removed := a.Engine.Update(func(ms []engine.MemberStatus) {
		ms[role] = engine.MemberStatus{State: engine.MemberMissing}
	})
	err := a.persist(removed)
	if err != nil && a.durable.Load() < removed.Gen {
		// Not recorded: the role is faulty again and its device stays,
		// so that a retry removes it (not "already removed" with the
		// device still open).
		a.Engine.Update(func(ms []engine.MemberStatus) {
			if ms[role].State == engine.MemberMissing {
				ms[role] = prev
			}
		})
		return err
	}
	// Recorded (err: some member did not take it, and was failed).
	// Release the device: out of every queue's ring, then closed.
	a.mu.Lock()
	old := a.Members[role]
	a.Members[role] = nil
	a.publishFile(role, nil)
	a.mu.Unlock()
	return errors.Join(err, a.swapFile(role, nil, old))
}
