package array

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ublk-raid/ublk-raid/resync"
	"slices"

	"github.com/ublk-raid/ublk-raid/engine"
)

// spareMember is a standby device: held open (so nothing else takes it),
// its superblock says spare, and the role table lists it after the roles.
type spareMember struct {
	m    *Member
	uuid [16]byte
}

// Spares lists the paths of the array's spares.
func (a *Array) Spares() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.spares))
	for _, s := range a.spares {
		out = append(out, s.m.Path)
	}
	return out
}

// setSpareEntries lists the spares in sb's role table after the roles.
// Called with a.mu held.
func (a *Array) setSpareEntries(sb *engine.Superblock) {
	for i := int(sb.Members); i < engine.RoleTableSize; i++ {
		sb.Roles[i] = engine.RoleEntry{}
	}
	for j, s := range a.spares {
		if i := int(sb.Members) + j; i < engine.RoleTableSize {
			sb.Roles[i] = engine.RoleEntry{State: engine.RoleSpare, Member: s.uuid}
		}
	}
}

// AddSpare makes the device at path a spare of the array (mdadm --add):
// its superblock says spare and the members' role tables list it. When
// some role is faulty or missing, the spare takes it at once and a
// rebuild starts. Nothing is written when the device is in use, too
// small, carries a superblock of another array or of a member of this
// one (that is re-add's job), or a signature of data (AddSpareForce
// overwrites those two).
func (a *Array) AddSpare(path string) error { return a.AddSpareForce(path, false) }

// AddSpareForce is AddSpare; with force a device carrying another
// array's superblock or a signature of data (see package probe) is
// overwritten.
func (a *Array) AddSpareForce(path string, force bool) error {
	return a.AddSpares([]string{path}, force)
}

// AddSpares is AddSpareForce for several devices: every one is opened
// and checked before any is written, so a refusal adds none.
func (a *Array) AddSpares(paths []string, force bool) error {
	if a.sync == nil {
		return errors.New("a raid0 array has no spares")
	}
	a.mu.Lock()
	for i, path := range paths {
		for r, m := range a.Members {
			if m != nil && m.Path == path {
				a.mu.Unlock()
				return fmt.Errorf("%s already holds role %d", path, r)
			}
		}
		for _, s := range a.spares {
			if s.m.Path == path {
				a.mu.Unlock()
				return fmt.Errorf("%s is already a spare", path)
			}
		}
		if slices.Contains(paths[:i], path) {
			a.mu.Unlock()
			return fmt.Errorf("%s is given twice", path)
		}
	}
	a.mu.Unlock()
	var ms []*Member
	for _, path := range paths {
		m, err := openMember(a.open, path)
		if err != nil {
			for _, m := range ms {
				m.Close()
			}
			return err
		}
		ms = append(ms, m)
	}
	return a.addSpares(ms, force)
}

// addSpares checks every device of ms, then (only if all pass) makes
// each a spare and activates one if a role waits. A device not made a
// spare is closed.
func (a *Array) addSpares(ms []*Member, force bool) error {
	if len(ms) == 0 {
		return nil
	}
	closeFrom := func(i int) {
		for _, m := range ms[i:] {
			m.Close()
		}
	}
	if a.sync == nil {
		closeFrom(0)
		return errors.New("a raid0 array has no spares")
	}
	a.mu.Lock()
	n := a.Engine.MemberCount() + len(a.spares)
	a.mu.Unlock()
	if n+len(ms) > engine.RoleTableSize {
		closeFrom(0)
		return fmt.Errorf("the role table is full: at most %d members and spares", engine.RoleTableSize)
	}
	sbs := make([]*engine.Superblock, len(ms))
	wipes := make([]signatures, len(ms))
	for i, m := range ms {
		if lateOn(m) {
			// As addMember: a write given up after the member timeout
			// may still land on it.
			closeFrom(0)
			return fmt.Errorf("%s: I/O given up after the member timeout is still out on it: it can be added once the device answers", m.Path)
		}
		sb, sigs, err := a.spareSuperblock(m, force)
		if err != nil {
			closeFrom(0)
			return err
		}
		sbs[i], wipes[i] = sb, sigs
	}
	blocks := make([][]byte, len(ms))
	for i := range ms {
		b, err := sbs[i].MarshalBinary()
		if err != nil {
			closeFrom(0)
			return fmt.Errorf("superblock of spare %s: %w", ms[i].Path, err)
		}
		blocks[i] = b
	}
	// Two names of one storage (multipath nodes: each opens, O_EXCL or
	// not) pass every check above, neither carrying a superblock yet.
	if err := distinctDevices(ms); err != nil {
		closeFrom(0)
		return err
	}
	for i, m := range ms {
		err := wipeSignatures(m, wipes[i])
		if err == nil {
			err = writeSB(m, blocks[i])
		}
		if err != nil {
			closeFrom(i)
			return fmt.Errorf("superblock of spare %s: %w", m.Path, err)
		}
		a.mu.Lock()
		a.spares = append(a.spares, spareMember{m: m, uuid: sbs[i].MemberUUID})
		err = a.writeSuperblocks(a.Engine.State(), false)
		a.mu.Unlock()
		if err != nil {
			closeFrom(i + 1)
			return err
		}
	}
	a.activateSpare()
	return nil
}

// distinctDevices refuses devices of ms that share their storage (two
// nodes of one disk), which nothing else tells while neither carries a
// superblock: each takes a block of its own at the superblock's offset,
// then each must still read its own (one overwritten by a later one
// shares its storage). What each held there is put back in every case
// (the last first: on shared storage the first one read is the original),
// so the devices are left as they were; only an error putting a block
// back leaves a probe block on that device (said in the error).
func distinctDevices(ms []*Member) (err error) {
	if len(ms) < 2 {
		return nil
	}
	var token [16]byte
	if _, err := rand.Read(token[:]); err != nil {
		return err
	}
	probe := func(i int) []byte {
		b := make([]byte, engine.SuperblockSize)
		for off := 0; off+24 <= len(b); off += 24 {
			copy(b[off:], token[:])
			binary.LittleEndian.PutUint64(b[off+16:], uint64(i))
		}
		return b
	}
	orig := make([][]byte, len(ms))
	for i, m := range ms {
		b, err := m.ReadBlock(engine.SuperblockOffset, engine.SuperblockSize)
		if err != nil {
			return fmt.Errorf("%s cannot be read: %w", m.Path, err)
		}
		orig[i] = b
	}
	written := 0
	defer func() {
		for i := written - 1; i >= 0; i-- {
			if werr := ms[i].WriteBlockSync(engine.SuperblockOffset, orig[i]); werr != nil {
				err = errors.Join(err, fmt.Errorf("%s: putting back its block at byte %d: %w", ms[i].Path, engine.SuperblockOffset, werr))
			}
		}
	}()
	for i, m := range ms {
		if err := m.WriteBlockSync(engine.SuperblockOffset, probe(i)); err != nil {
			return fmt.Errorf("%s cannot be written: %w", m.Path, err)
		}
		written = i + 1
	}
	for i, m := range ms {
		b, err := m.ReadBlock(engine.SuperblockOffset, engine.SuperblockSize)
		if err != nil {
			return fmt.Errorf("%s cannot be read: %w", m.Path, err)
		}
		if bytes.Equal(b, probe(i)) {
			continue
		}
		same := "another device given"
		for j := i + 1; j < len(ms); j++ {
			if bytes.Equal(b, probe(j)) {
				same = ms[j].Path
			}
		}
		return fmt.Errorf("%s and %s are the same storage: give it once", m.Path, same)
	}
	return nil
}

// spareSuperblock checks that m may become a spare (see AddSpareForce)
// and returns its superblock and the signatures to erase (forced). Reads
// only.
func (a *Array) spareSuperblock(m *Member, force bool) (*engine.Superblock, signatures, error) {
	ref := a.refSB()
	if ref == nil {
		return nil, nil, errors.New("the array has no superblock to copy")
	}
	if lb := a.logicalBlock(); lb != 0 && m.LogicalBlock != lb {
		return nil, nil, fmt.Errorf("%s has %d-byte logical blocks; the array has %d", m.Path, m.LogicalBlock, lb)
	}
	need := ref.DataOffset + a.Engine.MemberSectors()<<9
	if uint64(m.Size) < need {
		return nil, nil, fmt.Errorf("%s is %d bytes; a spare needs at least %d", m.Path, m.Size, need)
	}
	sigs, err := a.checkNewDevice(m, ref, force)
	if err != nil {
		return nil, nil, err
	}
	sb := *ref
	sb.Role = engine.SpareRole
	if _, err := rand.Read(sb.MemberUUID[:]); err != nil {
		return nil, nil, err
	}
	sb.DataSectors = (uint64(m.Size) - sb.DataOffset) >> 9 &^ 7
	// sb keeps ref's events: its role table is that generation's. The
	// array's current events (a generation written since ref was taken,
	// a rebuild ending say) with ref's older table would make two
	// superblocks of one generation disagree, which assembly refuses.
	return &sb, sigs, nil
}

// logicalBlock is the logical block size of the array's members (0: no
// member open).
func (a *Array) logicalBlock() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.Members {
		if m != nil {
			return m.LogicalBlock
		}
	}
	return 0
}

// interruptScrub stops a running check or repair after a member failed
// with no spare standing by (activateSpare does with one), as md's
// md_error interrupts any sync: left running, it would compare fewer
// copies than it started with and end "ok", and refuse re-add and
// replace until it ends. It is not resumed (neither is md's).
func (a *Array) interruptScrub() {
	if a.sync == nil {
		return
	}
	a.spareMu.Lock()
	defer a.spareMu.Unlock()
	a.preemptJob(func(k resync.Kind) bool { return k == resync.Check || k == resync.Repair })
}

// activateSpare puts a spare into the first faulty or missing role and
// starts its rebuild, when there is both and no background job runs (a
// job's end calls it again). Safe from any goroutine.
func (a *Array) activateSpare() {
	if a.sync == nil {
		return
	}
	a.spareMu.Lock()
	defer a.spareMu.Unlock()
	k, busy := a.sync.active()
	if busy && k != resync.Resync && k != resync.Check && k != resync.Repair {
		return // (a resync gives way: preemptResync; a check or repair too, below)
	}
	role := -1
	for r, m := range a.Engine.State().Members {
		if m.State == engine.MemberFaulty || m.State == engine.MemberMissing {
			role = r
			break
		}
	}
	a.mu.Lock()
	if role < 0 || len(a.spares) == 0 || a.closing || a.stopped {
		a.mu.Unlock()
		return
	}
	if a.createUndo != nil {
		// A new array whose device may still be refused: its rebuild
		// would write the spare where nothing saves what it replaces,
		// and the failed member would be closed before its undo.
		// KeepCreated activates the spare.
		a.spareLater = true
		a.mu.Unlock()
		return
	}
	tries := len(a.spares)
	a.mu.Unlock()
	if busy && (k == resync.Check || k == resync.Repair) {
		// A member failed during a check or repair: the job is
		// interrupted so that the spare's rebuild starts now, as md's
		// md_error interrupts any running sync (MD_RECOVERY_INTR) and
		// recovery follows; the check is not resumed (neither is md's).
		// Left running, it would keep the array degraded, the spare
		// idle, for as long as it takes.
		a.preemptJob(func(k resync.Kind) bool { return k == resync.Check || k == resync.Repair })
	}
	// A spare that cannot take the role (its log area or superblock not
	// writable, say) does not keep the others out: each is tried once, in
	// order, as md goes on to the next spare; those refused stay spares,
	// in front as before.
	var back []spareMember
	defer func() {
		if len(back) > 0 {
			a.mu.Lock()
			a.spares = append(back, a.spares...)
			a.mu.Unlock()
		}
	}()
	for range tries {
		a.mu.Lock()
		if len(a.spares) == 0 || a.closing || a.stopped {
			a.mu.Unlock()
			return
		}
		s := a.spares[0]
		a.spares = a.spares[1:]
		a.activating = s.m
		a.mu.Unlock()
		err := a.addOpen(s.m, role, false, s.uuid)
		a.mu.Lock()
		a.activating = nil
		a.mu.Unlock()
		took := err == nil
		if err != nil {
			took = a.holdsRole(s.m)
			if !took {
				back = append(back, s)
			}
		}
		if a.OnSpareActivated != nil {
			a.OnSpareActivated(role, s.m.Path, err)
		}
		if took {
			return
		}
	}
}

// holdsRole reports whether m holds a role of the array.
func (a *Array) holdsRole(m *Member) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.Members, m)
}

// returnSpare makes s a spare again after a failed activation, unless it
// got as far as taking its role.
func (a *Array) returnSpare(s spareMember) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.Members {
		if m == s.m {
			return
		}
	}
	a.spares = append([]spareMember{s}, a.spares...)
}

// RemoveSpare drops the spare at path (mdadm --remove of a spare): the
// role tables stop listing it and the device is closed.
func (a *Array) RemoveSpare(path string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.spares {
		if s.m.Path != path {
			continue
		}
		a.spares = append(a.spares[:i:i], a.spares[i+1:]...)
		err := a.writeSuperblocks(a.Engine.State(), false)
		s.m.Close()
		return err
	}
	return fmt.Errorf("%s is not a spare of this array", path)
}
