package engine

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// MemberSB is what one opened member said: its superblock, or why it has
// none (Err wraps ErrNoSuperblock for a device without one,
// ErrCorruptSuperblock for a damaged one, or is an I/O error).
type MemberSB struct {
	Path string
	SB   *Superblock
	Err  error
}

// RoleAssignment is the state of one role after assembly.
type RoleAssignment struct {
	// State is the role's effective state: RoleActive (Path is in sync),
	// RoleRebuilding (Path is in sync below RecoveryOffset), RoleFaulty
	// (the freshest role table says the role's member failed; Path, if
	// set, must not be read) or RoleMissing (no member with current data
	// holds the role).
	State RoleState
	// Path is the input holding the role: "" when missing; for a faulty
	// role, the failed member if it was given (never read).
	Path string
	// Member is the member UUID the freshest role table names for the role
	// (zero for a missing role without a last holder).
	Member [16]byte
	// RecoveryOffset is the rebuild progress of a rebuilding role, in
	// sectors from the data offset.
	RecoveryOffset uint64
	// Forced is set for a role given by Assemble's force to a member the
	// freshest table does not trust (stale, faulty or missing there): the
	// role is RoleRebuilding from 0 on Path, every written region is
	// copied onto it; its superblock is to be rewritten from Freshest.
	Forced bool
	// Promoted is set for a role whose member a forced assembly put in
	// sync although its superblock is older than the freshest (or the
	// freshest table does not trust it): the members in sync could not
	// start the array without it (forceUp), so its data is trusted as
	// it is, as mdadm --force "forces the event count" of the freshest
	// of the stale devices. The writes it missed are lost. The role is
	// RoleActive on Path; its superblock is to be rewritten from
	// Freshest, and its bitmap copy and write-hole log area, from before
	// it left, are not read. PromotedEvents is its own superblock's
	// generation.
	Promoted       bool
	PromotedEvents uint64
	// StalePath, for a missing role, is the input the freshest role table
	// names for the role (as its holder, or as its last holder) but whose
	// superblock is older: its data cannot be trusted, so the role is
	// missing, and the member is the natural rebuild target for it. It is
	// also listed in Assembly.Stale.
	StalePath string
}

// Assembly is the array state decided from the members' superblocks.
type Assembly struct {
	UUID          [16]byte
	Name          string
	Level, Layout uint32 // as in the superblock: 0, 1, 5, 6, 10; md's layout number
	ChunkSectors  uint32
	Members       int   // member count (raid disks); len(Roles)
	CreateTime    int64 // Unix nanoseconds
	// Events is the freshest generation among the members.
	Events uint64
	// Clean is true when the freshest superblock says the array was
	// stopped cleanly.
	Clean bool
	// Forced is true when assembled with AssembleOptions.Force.
	Forced bool
	// Roles, indexed by role, are the members holding them.
	Roles []RoleAssignment
	// Stale lists, in input order, the inputs whose superblock is older
	// than the freshest (except spares): their data is never read until
	// they are rebuilt. Those the freshest table still names for a role
	// are that role's StalePath (or Path, if the role is faulty); the
	// others (replaced while away) hold no role.
	Stale []string
	// Spares lists the inputs whose superblock says they are spares
	// (whatever their generation: a spare holds no data).
	Spares []string
	// Role counts by effective state: they add up to Members.
	ActiveRoles, RebuildingRoles, FaultyRoles, MissingRoles int
	// Degraded is true when a role is not active.
	Degraded bool
	// DirtyDegraded is true when a raid5/6 array with a write-hole log
	// (Freshest.LogBytes) was not stopped cleanly, is degraded and was
	// not forced: Assemble lets it through because the log can close
	// what the crash left open, and the caller must refuse it
	// (ErrDirtyDegraded) unless the log replays every live entry.
	DirtyDegraded bool
	// Failed is true when the array certainly cannot serve data: no role
	// is active, a RAID 0 role is not active, a RAID 10 has fewer
	// active roles than members/copies, or a RAID 5 (6) has more than one
	// (two) roles not active. Otherwise the engine decides with
	// the geometry (which roles hold copies of which chunks) whether the
	// active roles cover the array.
	Failed bool
	// Freshest is a copy of a superblock of the freshest generation: the
	// base for the next generation's superblocks.
	Freshest *Superblock
}

// NextEvents returns the generation to write with the next state change.
func (a *Assembly) NextEvents() uint64 { return a.Events + 1 }

// Assembly errors, wrapped by Assemble's errors (use errors.Is). Assemble
// also returns errors wrapping ErrNoSuperblock (no member has a superblock:
// the caller may create the array) and ErrCorruptSuperblock (a member's
// superblock is damaged: leave the member out to assemble without it).
var (
	// ErrNotMember: some members have no superblock while others do.
	ErrNotMember = errors.New("not a member of the array")
	// ErrMixedArrays: the members belong to different arrays.
	ErrMixedArrays = errors.New("members of different arrays")
	// ErrDuplicateMember: the same path or the same member (UUID) twice.
	ErrDuplicateMember = errors.New("duplicate member")
	// ErrCorruptArray: superblocks of the same generation disagree.
	ErrCorruptArray = errors.New("inconsistent array")
	// ErrSplitBrain: members ran without each other (each records the
	// other failed or missing, and no member was with both), so their
	// data diverged; AssembleOptions.Force picks the freshest side.
	ErrSplitBrain = errors.New("split brain")
	// ErrFailedMember: the only members with current data are recorded
	// as failed by their own superblocks; Force starts from them anyway.
	ErrFailedMember = errors.New("member recorded as failed")
	// ErrDirtyDegraded: a raid5/6 array that was not stopped cleanly is
	// degraded (md's "cannot start dirty degraded array") and has no
	// write-hole log that covers what the crash left (see
	// Assembly.DirtyDegraded); Force starts it anyway.
	ErrDirtyDegraded = errors.New("dirty degraded array")
)

// AssembleOptions changes Assemble's rules.
type AssembleOptions struct {
	// Force assembles from the members given even when they disagree
	// about each other (split brain) or the freshest is recorded as
	// failed: the freshest is authoritative (its own role active; of
	// several, one in sync by its own table before one recording itself
	// failed: forceKeep), and
	// every other member given that the freshest table does not trust in
	// its role is put back in it for a full rebuild (RoleAssignment.Forced).
	// When the members so in sync cannot start the array (raid0: a
	// role out; raid5: two; raid6: three; raid10: a chunk without a
	// copy), the given members that can are put in sync as they are
	// instead, the freshest first, until the array can start
	// (RoleAssignment.Promoted; see forceUp); never one on the other side
	// of a split brain from them: if the kept side cannot start without
	// such members, the assembly is refused (ErrSplitBrain).
	// It also starts a raid5/6 array that is dirty and degraded
	// (ErrDirtyDegraded), as mdadm --force does.
	Force bool
}

// EventSlack is how many generations a member may lag the freshest and
// still be trusted, when the freshest table names it in its role as
// active or rebuilding: a crash between the members' superblock writes of
// one generation leaves some members one behind (mdadm allows the same
// margin). Any state change that makes a member's data stale (its failure,
// its removal) is recorded by the next generation's table, which a lagging
// member's own role entry would then contradict.
const EventSlack = 1

// arrayDesc names an array in messages: its UUID and name.
func arrayDesc(sb *Superblock) string {
	return fmt.Sprintf("%s (name %q)", UUIDString(sb.ArrayUUID), sb.Name)
}

// Assemble decides the array state from what each member said:
//
//   - All superblocks must carry the same array UUID; inputs without one
//     are not part of the array (an error, unless no input has one: then
//     the error wraps ErrNoSuperblock); a corrupt superblock is an error
//     (the caller leaves that member out to assemble degraded).
//   - The same path or member UUID twice is an error.
//   - The freshest generation (highest events) defines the array: level,
//     layout, chunk, member count and role table. Superblocks of that
//     generation must agree on all of them (ErrCorruptArray otherwise);
//     two of them claiming the same role is an ErrCorruptArray.
//   - Each role goes to the input whose member UUID the freshest table
//     names for it. If that input's superblock is older, it is stale: the
//     role is missing, and the input is listed in Stale and the role's
//     StalePath. So of two members claiming a role at an older generation,
//     the one the freshest table names gets StalePath and the other is
//     only Stale. A role the freshest table marks faulty stays faulty.
//   - Inputs the freshest table does not name are spares if their own
//     superblock says so, otherwise stale (replaced since). So is one it
//     names as rebuilding whose own superblock still says spare (its
//     activation was torn): its role is missing.
//   - A member at most EventSlack generations behind that the freshest
//     table names, in the role its own superblock holds, as active or
//     rebuilding is current (a torn superblock update), not stale.
//   - Two members that ran without each other are refused (ErrSplitBrain):
//     no member is in the array by both tables, and each records a member
//     of the other side failed or missing (Diverged). A
//     freshest generation whose table marks every member given with
//     current data failed is refused (ErrFailedMember). See
//     AssembleOptions.Force, which also puts stale members in sync when
//     the members in sync cannot start the array (forceUp).
func Assemble(ms []MemberSB) (*Assembly, error) { return AssembleWith(ms, AssembleOptions{}) }

// AssembleWith is Assemble with options.
func AssembleWith(ms []MemberSB, opt AssembleOptions) (*Assembly, error) {
	if len(ms) == 0 {
		return nil, errors.New("no members given")
	}
	paths := make(map[string]bool, len(ms))
	for _, m := range ms {
		if paths[m.Path] {
			return nil, fmt.Errorf("%w: %s is given twice", ErrDuplicateMember, m.Path)
		}
		paths[m.Path] = true
	}

	// Inputs without a (usable) superblock.
	var ref *MemberSB // the first input with a superblock
	var none, broken []string
	var brokenErrs []error
	for i := range ms {
		m := &ms[i]
		switch {
		case m.SB != nil:
			if ref == nil {
				ref = m
			}
		case m.Err == nil || errors.Is(m.Err, ErrNoSuperblock):
			none = append(none, m.Path)
		default:
			broken = append(broken, fmt.Sprintf("%s: %v", m.Path, m.Err))
			brokenErrs = append(brokenErrs, m.Err)
		}
	}
	if len(broken) > 0 {
		msg := strings.Join(broken, "; ")
		if ref != nil {
			msg += " (leave it out to assemble the array without it)"
		}
		if len(none) > 0 {
			msg += "; no superblock on " + strings.Join(none, ", ")
		}
		return nil, errorWithMessage{brokenErrs, "member " + msg}
	}
	if ref == nil {
		return nil, fmt.Errorf("%w on %s", ErrNoSuperblock, strings.Join(none, ", "))
	}
	if len(none) > 0 {
		word := "member"
		if len(none) > 1 {
			word = "members"
		}
		return nil, fmt.Errorf("%s %s: %w %s, whose superblock %s carries: no ublk-raid superblock", word, strings.Join(none, ", "), ErrNotMember, arrayDesc(ref.SB), ref.Path)
	}

	// One array, each member once.
	owner := make(map[[16]byte]string, len(ms))
	freshest := ref
	for i := range ms {
		m := &ms[i]
		if m.SB.ArrayUUID != ref.SB.ArrayUUID {
			return nil, fmt.Errorf("%w: member %s belongs to array %s, not %s like %s",
				ErrMixedArrays, m.Path, arrayDesc(m.SB), arrayDesc(ref.SB), ref.Path)
		}
		if p, dup := owner[m.SB.MemberUUID]; dup {
			return nil, fmt.Errorf("%w: %s and %s are the same member %s (the same device twice, or a copy of one)",
				ErrDuplicateMember, p, m.Path, UUIDString(m.SB.MemberUUID))
		}
		owner[m.SB.MemberUUID] = m.Path
		if m.SB.Events > freshest.SB.Events {
			freshest = m
		}
	}
	// Two tables of the freshest generation: the refuted one's holders
	// are stale, and the freshest is a holder of the other.
	refuted := refutedTables(ms, freshest.SB.Events)
	for i := range ms {
		if m := &ms[i]; refuted[freshest.Path] && m.SB.Events == freshest.SB.Events && !refuted[m.Path] {
			freshest = m
		}
	}
	var otherSide map[string]bool // with Force: the other table's holders at the freshest generation
	if !opt.Force {
		if err := splitBrain(ms, freshest.SB, forceKeep(ms, freshest.SB.Events, refuted)); err != nil {
			return nil, err
		}
	} else {
		// A split brain whose sides reached the same generation (each
		// started alone as often: the common case) leaves two tables of
		// the freshest generation, neither refuted. Force keeps the side
		// of the member forceKeep picks (what the split-brain refusal
		// names): members of the generation with another table are not
		// trusted, as if refuted, and are put back for a full rebuild, as
		// a side behind would be. (A difference in the data layout is
		// still refused below.)
		keep := forceKeep(ms, freshest.SB.Events, refuted)
		for i := range ms {
			m := &ms[i]
			if keep == nil || m.SB.Events != keep.SB.Events || refuted[m.Path] ||
				arrayDiff(keep.SB, m.SB) == "" || geometryDiff(keep.SB, m.SB) != "" {
				continue
			}
			if refuted == nil {
				refuted = make(map[string]bool)
			}
			refuted[m.Path] = true
			if otherSide == nil {
				otherSide = make(map[string]bool)
			}
			otherSide[m.Path] = true
		}
		if refuted[freshest.Path] {
			freshest = keep
		}
	}
	fsb := freshest.SB

	// The freshest generation must be one consistent state.
	claimed := make(map[uint32]string)
	var sized *MemberSB // the first member in a role: its data size
	for i := range ms {
		m := &ms[i]
		if m.SB.Events != fsb.Events || refuted[m.Path] {
			continue
		}
		if m.SB.Role != SpareRole {
			if p, dup := claimed[m.SB.Role]; dup {
				return nil, fmt.Errorf("%w: members %s and %s both claim role %d at events %d",
					ErrCorruptArray, p, m.Path, m.SB.Role, fsb.Events)
			}
			claimed[m.SB.Role] = m.Path
		}
		if what := arrayDiff(fsb, m.SB); what != "" {
			return nil, fmt.Errorf("%w: members %s and %s disagree on the %s at events %d",
				ErrCorruptArray, freshest.Path, m.Path, what, fsb.Events)
		}
		// Every member of one generation records the array's data size
		// (create, add and grow write one size to all; a torn grow leaves
		// the new size a generation ahead): a smaller one would shrink
		// the array, and move a far layout's copies, on one record's say.
		if m.SB.Role != SpareRole && int(m.SB.Role) < len(fsb.Roles) && fsb.Roles[m.SB.Role].State != RoleFaulty {
			if sized == nil {
				sized = m
			} else if m.SB.DataSectors != sized.SB.DataSectors {
				return nil, fmt.Errorf("%w: members %s and %s disagree on the data size (%d, %d sectors) at events %d",
					ErrCorruptArray, sized.Path, m.Path, sized.SB.DataSectors, m.SB.DataSectors, fsb.Events)
			}
		}
	}

	a := &Assembly{
		UUID:         fsb.ArrayUUID,
		Name:         fsb.Name,
		Level:        fsb.Level,
		Layout:       fsb.Layout,
		ChunkSectors: fsb.ChunkSectors,
		Members:      int(fsb.Members),
		CreateTime:   fsb.CreateTime,
		Events:       fsb.Events,
		Clean:        fsb.Clean,
		Forced:       opt.Force,
		Roles:        make([]RoleAssignment, fsb.Members),
	}
	cp := *fsb
	a.Freshest = &cp

	byUUID := make(map[[16]byte]*MemberSB, len(ms))
	for i := range ms {
		byUUID[ms[i].SB.MemberUUID] = &ms[i]
	}
	// With Force, the authority (forceKeep).
	var auth *MemberSB
	if opt.Force {
		auth = forceKeep(ms, fsb.Events, refuted)
	}
	holds := make(map[string]bool, len(ms)) // paths the freshest table names for a role
	slack := make(map[string]bool)          // current although a generation behind
	forced := make(map[string]bool)         // put back for a full rebuild (Force)
	for r := range a.Roles {
		e := fsb.Roles[r]
		ra := &a.Roles[r]
		ra.Member = e.Member
		m := byUUID[e.Member]
		if e.Member == ([16]byte{}) {
			m = nil
		}
		if m != nil {
			holds[m.Path] = true
		}
		inRole := e.State == RoleActive || e.State == RoleRebuilding
		// A member a generation behind is trusted only if it lays the
		// data out as the freshest says (md's super_1_load rejects a
		// "strangely different" superblock whatever its events): those
		// fields never change in an array's life, so one that differs is
		// corrupt or crafted, and trusted it would be served with another
		// layout, its fields spreading to every member at the next
		// update. It is stale instead. (At the freshest generation a
		// difference refuses the assembly, above: which one is right?)
		trusted := m != nil && inRole && !refuted[m.Path] && (m.SB.Events == fsb.Events ||
			m.SB.Events+EventSlack >= fsb.Events && m.SB.Role == uint32(r) && geometryDiff(fsb, m.SB) == "")
		switch {
		case m != nil && m == auth:
			// Authoritative, even if its own table says it failed.
			ra.State, ra.Path = RoleActive, m.Path
			if e.State == RoleRebuilding {
				ra.State, ra.RecoveryOffset = RoleRebuilding, e.RecoveryOffset
			}
		case opt.Force && m != nil && !trusted && m.SB.Role == uint32(r) && a.Level != 0:
			ra.State, ra.Path, ra.Forced = RoleRebuilding, m.Path, true
			forced[m.Path] = true
		case e.State == RoleFaulty:
			ra.State = RoleFaulty
			if m != nil {
				ra.Path = m.Path
			}
		case m == nil:
			ra.State = RoleMissing
		case !trusted && m.SB.Role == SpareRole && e.State == RoleRebuilding && !refuted[m.Path]:
			// A spare whose activation was torn: the table puts it in
			// the role, its own superblock never took that (nor any
			// update since: one it failed would have failed it). Its
			// data is not trusted; it is a spare again (as mdadm takes
			// a device's own superblock's role), and the role missing
			// is rebuilt onto it afresh, with no operator needed. (A
			// spare's own superblock is not rewritten by updates, so
			// its generation tells nothing.)
			ra.State = RoleMissing
			delete(holds, m.Path)
		case !trusted:
			ra.State = RoleMissing
			ra.StalePath = m.Path
		default:
			// At the freshest generation the member's own role is this
			// one and not missing (Validate), so e is active or
			// rebuilding; a generation behind, the table says so.
			ra.State = e.State
			ra.Path = m.Path
			ra.RecoveryOffset = e.RecoveryOffset
			slack[m.Path] = m.SB.Events < fsb.Events
		}
	}
	var promoted map[string]bool
	if opt.Force {
		var err error
		if promoted, err = forceUp(ms, a, fsb, auth, forced, otherSide); err != nil {
			return nil, err
		}
	}
	for _, ra := range a.Roles {
		switch ra.State {
		case RoleActive:
			a.ActiveRoles++
		case RoleRebuilding:
			a.RebuildingRoles++
		case RoleFaulty:
			a.FaultyRoles++
		case RoleMissing:
			a.MissingRoles++
		}
	}
	if !opt.Force && a.ActiveRoles == 0 && a.RebuildingRoles == 0 {
		// Members whose own superblock, at the freshest generation,
		// records them failed: nothing else with current data was given.
		var self []string
		for _, ra := range a.Roles {
			if ra.State == RoleFaulty && ra.Path != "" && byPath(ms, ra.Path).SB.Events == fsb.Events {
				self = append(self, ra.Path)
			}
		}
		if len(self) > 0 {
			return nil, fmt.Errorf("%w: %s of array %s: the superblock of %s records it as failed at events %d and no member in sync was given; add --force %s to start the array from it anyway",
				ErrFailedMember, strings.Join(self, ", "), arrayDesc(fsb), self[0], fsb.Events, strings.Join(self, " "))
		}
	}
	for i := range ms {
		m := &ms[i]
		switch {
		case promoted[m.Path]:
		case holds[m.Path]:
			if (m.SB.Events < fsb.Events || refuted[m.Path]) && !slack[m.Path] && !forced[m.Path] {
				a.Stale = append(a.Stale, m.Path)
			}
		case m.SB.Role == SpareRole:
			a.Spares = append(a.Spares, m.Path)
		default:
			// Claims a role the freshest table gives to another member
			// (or to none): replaced while this one was away. Its events
			// are necessarily older: at the freshest generation the
			// table names every member holding a role.
			a.Stale = append(a.Stale, m.Path)
		}
	}
	a.Degraded = a.ActiveRoles < a.Members
	a.Failed = a.ActiveRoles == 0 || (a.Level == 0 && a.Degraded)
	if a.Level == 10 && !a.Failed {
		if copies, err := raid10Copies(a.Layout); err == nil {
			a.Failed = a.ActiveRoles*copies < a.Members
		}
	}
	if IsParityLevel(Level(a.Level)) {
		a.Failed = parityFailed(Level(a.Level), a.Members, a.ActiveRoles)
		if err := checkDirtyDegraded(a, opt); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// forceUp puts in sync, for a forced assembly whose members in sync
// (a.Roles, as decided so far) cannot start the array, the members given
// that can be: each holding a role by its own superblock (the role its
// own table names it in, active, or faulty if it recorded its own
// failure: not rebuilding, whose data above its offset was never
// written) that is not in sync, laid out as the freshest says, and that
// is not on the other side of a split brain from the members in sync
// (see below). Only each role's freshest claimant is a candidate: of the
// members given whose own superblock holds the role (the kept side's
// excepted, and those of the other side: not this history), the one
// with the highest events (of equal events, the first given), as mdadm's
// force_array only considers each role's best device. If that one
// cannot be put in sync (it was rebuilding), no older claimant of the
// role is: the role's device since holds newer data, below its rebuild
// position. A claimant the freshest table no longer names for the role
// (another device took it since) is a candidate all the same when that
// device is not given or claims the role by its own superblock no
// longer (a spare again after a torn activation): it is then the
// role's freshest device at hand, as mdadm's best, whose missed writes
// are lost as any stale member's. The candidate with the highest events
// goes first (of equal events, the first given), and only while the
// array cannot start, and
// only one a chunk without a copy lives on (raid10): as mdadm --force,
// which raises the event count of the freshest stale device until enough
// are up to date (mdadm takes the freshest even where it adds no copy a
// raid10 lacks). Then those no longer needed (raid10: one put in sync
// early whose chunks a later one also holds) are dropped again, the
// least fresh first (of equal events, the last given), so that the
// freshest are kept. Such a member, forced to a full rebuild
// (a.Roles[r].Forced), is in sync instead; one that held the role (its
// freshest holder, older still) is then only stale. It returns the paths
// put in sync, and drops them from forced.
//
// A member on the other side of a split brain (otherSide: the holders
// of the other table at the freshest generation; or one that diverged,
// as splitBrain decides it, from a member in sync) is never put in
// sync: its data is another history, and beside the kept side's it
// would mix the two in one array. If the kept side cannot start the
// array without such members, the assembly is refused (ErrSplitBrain)
// rather than mixed: the operator keeps the other side by giving only
// its members.
func forceUp(ms []MemberSB, a *Assembly, fsb *Superblock, auth *MemberSB, forced, otherSide map[string]bool) (map[string]bool, error) {
	ok := startable(a, fsb)
	if ok == nil || ok(-1) {
		return nil, nil
	}
	// The superblocks of the members in sync: the kept side.
	var kept []*Superblock
	for _, ra := range a.Roles {
		if ra.State == RoleActive || ra.State == RoleRebuilding && !ra.Forced {
			kept = append(kept, byPath(ms, ra.Path).SB)
		}
	}
	diverged := func(m *MemberSB) bool {
		if otherSide[m.Path] {
			return true
		}
		for _, sb := range kept {
			if Diverged(sb, m.SB) && !bridged(ms, sb, m.SB) {
				return true
			}
		}
		return false
	}
	var others []string                // on the other side, in input order
	best := make(map[uint32]*MemberSB) // each role's freshest claimant
	for i := range ms {
		m := &ms[i]
		r := m.SB.Role
		if m == auth || m.SB.IsSpare() || slices.Contains(kept, m.SB) {
			continue
		}
		if diverged(m) {
			others = append(others, m.Path)
			continue
		}
		if int(r) >= a.Members || geometryDiff(fsb, m.SB) != "" {
			continue
		}
		if b := best[r]; b == nil || m.SB.Events > b.SB.Events {
			best[r] = m
		}
	}
	var cands []*MemberSB
	for i := range ms {
		m := &ms[i]
		r := m.SB.Role
		if best[r] != m {
			continue // not its role's freshest claimant (or not one at all)
		}
		if e := m.SB.Roles[r]; e.Member != m.SB.MemberUUID || e.State != RoleActive && e.State != RoleFaulty {
			continue // not in the role by its own table (rebuilding): nor is an older claimant
		}
		if ra := a.Roles[r]; ra.State == RoleActive || ra.State == RoleRebuilding && !ra.Forced {
			continue
		}
		cands = append(cands, m)
	}
	slices.SortStableFunc(cands, func(x, y *MemberSB) int { return cmp.Compare(y.SB.Events, x.SB.Events) })
	type up struct {
		m      *MemberSB
		before RoleAssignment // a.Roles[r] before it was put in sync
	}
	var ups []up // in the order put in sync
	for _, m := range cands {
		r := int(m.SB.Role)
		if ok(-1) {
			break
		}
		if a.Roles[r].State == RoleActive || !ok(r) {
			continue
		}
		// Two stale members of different sides are not put in sync
		// together either.
		if slices.ContainsFunc(ups, func(u up) bool { return Diverged(u.m.SB, m.SB) && !bridged(ms, u.m.SB, m.SB) }) {
			others = append(others, m.Path)
			continue
		}
		ups = append(ups, up{m, a.Roles[r]})
		if ra := a.Roles[r]; ra.Forced {
			delete(forced, ra.Path)
		}
		a.Roles[r] = RoleAssignment{State: RoleActive, Path: m.Path, Member: m.SB.MemberUUID, Promoted: true, PromotedEvents: m.SB.Events}
	}
	if !ok(-1) && len(others) > 0 {
		side := "none"
		var in []string
		for _, ra := range a.Roles {
			if ra.State == RoleActive || ra.State == RoleRebuilding && !ra.Forced {
				in = append(in, ra.Path)
			}
		}
		if len(in) > 0 {
			side = strings.Join(in, ", ")
		}
		return nil, fmt.Errorf("%w in array %s: --force keeps the freshest side, but its members that can be in sync (%s) cannot start the array, and %s ran on the other side (another history: never put in sync beside the kept side's data); give more of the kept side's members, or give only the other side's members (add --force %s) to keep that side",
			ErrSplitBrain, arrayDesc(fsb), side, strings.Join(others, ", "), strings.Join(others, " "))
	}
	// Those no longer needed, the least fresh first, go back to what they
	// were (rebuilt in full, or stale).
	if ok(-1) {
		for i := len(ups) - 1; i >= 0; i-- {
			u := ups[i]
			r := int(u.m.SB.Role)
			promoted := a.Roles[r]
			a.Roles[r] = u.before
			if ok(-1) {
				ups = slices.Delete(ups, i, i+1)
				if u.before.Forced {
					forced[u.before.Path] = true
				}
				continue
			}
			a.Roles[r] = promoted
		}
	}
	var out map[string]bool
	for _, u := range ups {
		if out == nil {
			out = make(map[string]bool)
		}
		out[u.m.Path] = true
	}
	return out, nil
}

// startable returns, for the level of a, a test of a's roles in sync:
// ok(-1) reports whether they can start the array, ok(r) whether role r
// put in sync too would hold a chunk none of them holds (nil: the
// layout is unknown; Assemble's callers refuse it).
func startable(a *Assembly, fsb *Superblock) func(r int) bool {
	active := func(r int) bool { return a.Roles[r].State == RoleActive }
	count := func() int {
		n := 0
		for r := range a.Roles {
			if active(r) {
				n++
			}
		}
		return n
	}
	switch Level(a.Level) {
	case Level0:
		return func(r int) bool { return r >= 0 || count() == a.Members }
	case Level1:
		return func(r int) bool { return r >= 0 || count() > 0 }
	case Level5, Level6:
		return func(r int) bool { return r >= 0 || !parityFailed(Level(a.Level), a.Members, count()) }
	case Level10:
		l, err := LayoutFromMD(a.Layout)
		if err != nil {
			return nil
		}
		g := Geometry{Level: Level10, Members: a.Members, Layout: l, ChunkSectors: uint64(a.ChunkSectors), MemberSectors: fsb.DataSectors}
		// ok(-1): every chunk has a copy in sync; ok(r): r holds a copy
		// of a chunk that has none.
		held := func(copies []Location) bool {
			for _, loc := range copies {
				if active(loc.Member) {
					return true
				}
			}
			return false
		}
		return func(r int) bool {
			if r < 0 {
				return g.EveryChunk(held)
			}
			return !g.EveryChunk(func(copies []Location) bool {
				return held(copies) || !slices.ContainsFunc(copies, func(l Location) bool { return l.Member == r })
			})
		}
	}
	return nil
}

// refutedTables returns the members (by path) of generation events whose
// role table another member of that generation refutes, when exactly one
// table of the generation is not refuted (else none).
//
// Two tables of one generation come from two runs: an update some members
// took and others never did (a torn or held update), then a run without
// the members that took it, which wrote the same generation. A table that
// names a member in its role as active or rebuilding while that member
// carries another table of the generation is the older one: a run naming
// a member in its role had that member with it, so its own generations
// start above the member's; the member took the other table later, in a
// run without this table's holders. Those holders are stale, as if a
// generation behind (md cannot tell such tables apart: mdadm trusts
// whichever it reads first).
func refutedTables(ms []MemberSB, events uint64) map[string]bool {
	var gen []*MemberSB
	for i := range ms {
		if ms[i].SB.Events == events {
			gen = append(gen, &ms[i])
		}
	}
	var tables []*Superblock // one per distinct table
	group := make([]int, len(gen))
	for i, m := range gen {
		group[i] = -1
		for t, sb := range tables {
			if arrayDiff(sb, m.SB) == "" {
				group[i] = t
				break
			}
		}
		if group[i] < 0 {
			group[i] = len(tables)
			tables = append(tables, m.SB)
		}
	}
	if len(tables) < 2 {
		return nil
	}
	isRefuted := make([]bool, len(tables))
	open := 0
	for t, sb := range tables {
		for i, x := range gen {
			if group[i] == t || x.SB.Role == SpareRole || int(x.SB.Role) >= len(sb.Roles) {
				continue
			}
			if e := sb.Roles[x.SB.Role]; e.Member == x.SB.MemberUUID && (e.State == RoleActive || e.State == RoleRebuilding) {
				isRefuted[t] = true
			}
		}
		if !isRefuted[t] {
			open++
		}
	}
	if open != 1 {
		return nil
	}
	roles := make(map[uint32]bool) // of the holders of the table not refuted
	for i, m := range gen {
		if !isRefuted[group[i]] && m.SB.Role != SpareRole {
			roles[m.SB.Role] = true
		}
	}
	out := make(map[string]bool)
	for i, m := range gen {
		if isRefuted[group[i]] {
			if m.SB.Role != SpareRole && roles[m.SB.Role] {
				// Two members claim one role at one generation: not what
				// two runs leave, but a copy or corruption (refused).
				return nil
			}
			out[m.Path] = true
		}
	}
	return out
}

// errorWithMessage wraps errs (for errors.Is) with its own message.
type errorWithMessage struct {
	errs []error
	msg  string
}

func (e errorWithMessage) Error() string   { return e.msg }
func (e errorWithMessage) Unwrap() []error { return e.errs }

// geometryDiff names the first field where a and b differ among those
// that never change in an array's life (level, layout, chunk size, member
// count, creation time), or "".
func geometryDiff(a, b *Superblock) string {
	switch {
	case a.Level != b.Level:
		return fmt.Sprintf("level (%d, %d)", a.Level, b.Level)
	case a.Layout != b.Layout:
		return fmt.Sprintf("layout (%#x, %#x)", a.Layout, b.Layout)
	case a.ChunkSectors != b.ChunkSectors:
		return fmt.Sprintf("chunk size (%d, %d sectors)", a.ChunkSectors, b.ChunkSectors)
	case a.Members != b.Members:
		return fmt.Sprintf("member count (%d, %d)", a.Members, b.Members)
	case a.CreateTime != b.CreateTime:
		return "creation time"
	}
	return ""
}

// arrayDiff names the first array-wide field where a and b differ, or "".
func arrayDiff(a, b *Superblock) string {
	switch {
	case a.Name != b.Name:
		return fmt.Sprintf("name (%q, %q)", a.Name, b.Name)
	case geometryDiff(a, b) != "":
		return geometryDiff(a, b)
	case a.Clean != b.Clean:
		return fmt.Sprintf("clean flag (%v, %v)", a.Clean, b.Clean)
	}
	for r := range a.Roles {
		if a.Roles[r] != b.Roles[r] {
			return fmt.Sprintf("role table entry %d (%s, %s)", r, roleDesc(a.Roles[r]), roleDesc(b.Roles[r]))
		}
	}
	return ""
}

func roleDesc(e RoleEntry) string {
	s := e.State.String()
	if e.State == RoleRebuilding {
		s += fmt.Sprintf(" at %d", e.RecoveryOffset)
	}
	if e.Member != ([16]byte{}) {
		s += " " + UUIDString(e.Member)
	}
	return s
}

// ArraySpec describes a new array for NewSuperblocks.
type ArraySpec struct {
	Name          string
	Level, Layout uint32 // 0, 1, 5, 6 or 10; md's layout number (Layout.MD, ParityLayout)
	ChunkSectors  uint32
	// MemberBytes are the sizes of the members' devices in bytes, in role
	// order; their number is the member count.
	MemberBytes []uint64
	// SpareBytes are the sizes of the spares' devices in bytes.
	SpareBytes []uint64
	// MemberNames and SpareNames, if set, name the devices (paths) in
	// errors, in the order of MemberBytes and SpareBytes.
	MemberNames, SpareNames []string
	// BitmapBytes is the size of the write-intent bitmap (0: none); it is
	// rounded up to 4 KiB.
	BitmapBytes uint64
	// LogBytes is the size of each member's write-hole log area (raid5/6;
	// 0: none), a multiple of 4 KiB from MinLogBytes to MaxLogBytes: it
	// ends at the data offset, past the bitmap and its headroom.
	LogBytes uint64
}

// NewSuperblocks returns the superblocks of a new array: one per member
// (roles 0..n-1, in order) then one per spare. They share a random array
// UUID, generation 1, all roles active, the spares listed in the role
// table, not clean, and one data offset: the largest Reserve gives for any
// of the devices. Every member's DataSectors is the array's member size,
// the smallest member's usable size (rounded down to 4 KiB): recorded on
// each, so that an assembly without the smallest (degraded) has the same
// size and, for raid10 far, the same placement; a spare's is its own
// (it takes the array's with a role).
func NewSuperblocks(spec ArraySpec) ([]*Superblock, error) {
	n, ns := len(spec.MemberBytes), len(spec.SpareBytes)
	if n == 0 {
		return nil, errors.New("no members")
	}
	if n+ns > RoleTableSize {
		return nil, fmt.Errorf("%d members and %d spares: at most %d in all", n, ns, RoleTableSize)
	}
	if spec.BitmapBytes > math.MaxUint64/2 {
		return nil, fmt.Errorf("bitmap of %d bytes is too large", spec.BitmapBytes)
	}
	if spec.LogBytes > MaxLogBytes {
		return nil, fmt.Errorf("write-hole log of %d bytes is too large", spec.LogBytes)
	}
	all := append(append([]uint64(nil), spec.MemberBytes...), spec.SpareBytes...)
	var dataOffset uint64
	for _, size := range all {
		dataOffset = max(dataOffset, Reserve(size, roundUp(spec.BitmapBytes, BitmapAlign)+spec.LogBytes))
	}
	bitmapBytes := roundUp(spec.BitmapBytes, BitmapAlign)
	var bitmapOffset uint64
	if bitmapBytes > 0 {
		bitmapOffset = SuperblockOffset + SuperblockSize
	}
	var logOffset uint64
	if spec.LogBytes > 0 {
		logOffset = dataOffset - spec.LogBytes // (Reserve left room for it)
	}
	now := time.Now().UnixNano()
	base := Superblock{
		LogOffset:    logOffset,
		ArrayUUID:    newUUID(),
		Name:         spec.Name,
		Level:        spec.Level,
		Layout:       spec.Layout,
		ChunkSectors: spec.ChunkSectors,
		Members:      uint32(n),
		DataOffset:   dataOffset,
		BitmapOffset: bitmapOffset,
		BitmapBytes:  bitmapBytes,
		Events:       1,
		LogBytes:     spec.LogBytes,
		CreateTime:   now,
		UpdateTime:   now,
	}
	uuids := make([][16]byte, len(all))
	for i := range uuids {
		uuids[i] = newUUID()
		state := RoleActive
		if i >= n {
			state = RoleSpare
		}
		base.Roles[i] = RoleEntry{State: state, Member: uuids[i]}
	}
	sbs := make([]*Superblock, len(all))
	for i, size := range all {
		what := fmt.Sprintf("member %d", i)
		if i < len(spec.MemberNames) {
			what = "member " + spec.MemberNames[i]
		}
		if i >= n {
			what = fmt.Sprintf("spare %d", i-n)
			if i-n < len(spec.SpareNames) {
				what = "spare " + spec.SpareNames[i-n]
			}
		}
		const minData = 1 << 20
		if size < dataOffset || size-dataOffset < minData {
			return nil, fmt.Errorf("%s is %d bytes: too small, need at least %d (data offset %d + 1 MiB)", what, size, dataOffset+minData, dataOffset)
		}
		sb := base
		sb.Role = uint32(i)
		if i >= n {
			sb.Role = SpareRole
		}
		sb.MemberUUID = uuids[i]
		sb.DataSectors = (size - dataOffset) / BitmapAlign * (BitmapAlign / sbSector)
		if err := sb.Validate(); err != nil {
			return nil, fmt.Errorf("new array: %w", err)
		}
		sbs[i] = &sb
	}
	least := sbs[0].DataSectors
	for _, sb := range sbs[1:n] {
		least = min(least, sb.DataSectors)
	}
	for _, sb := range sbs[:n] {
		sb.DataSectors = least
	}
	return sbs, nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails (crypto/rand crashes the program instead)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// byPath is the input named path (Assemble checked that there is one).
func byPath(ms []MemberSB, path string) *MemberSB {
	for i := range ms {
		if ms[i].Path == path {
			return &ms[i]
		}
	}
	return nil
}

// inArray is the set of members sb's table holds in the array: the
// members of its active and rebuilding roles.
func inArray(sb *Superblock) map[[16]byte]bool {
	in := make(map[[16]byte]bool, sb.Members)
	for _, e := range sb.Roles[:sb.Members] {
		if e.State == RoleActive || e.State == RoleRebuilding {
			in[e.Member] = true
		}
	}
	return in
}

// excludes reports whether sb's table records as failed or missing a
// member (other than sb's own) that is in the set in.
func excludes(sb *Superblock, in map[[16]byte]bool) bool {
	for _, e := range sb.Roles[:sb.Members] {
		if (e.State == RoleFaulty || e.State == RoleMissing) && e.Member != sb.MemberUUID && in[e.Member] {
			return true
		}
	}
	return false
}

// Diverged reports whether the members whose superblocks are a and b ran
// without each other (a split brain): no member is in the array by both
// tables, and each table records as failed or missing a member the other
// holds in the array, or one does and the other has put another device in
// the role of a member the first holds (a spare took the role, and its
// failure record with it). Two members that each ran alone after a split, or
// a member started alone after the others recorded it failed, are so:
// their data diverged, and trusting one side's generation count, or
// copying only one side's dirty regions onto the other, would mix them or
// silently drop one side's writes. A member that merely missed updates
// (it failed, was left out, or was stopped) is not: it records nobody of
// the newer side as gone, or it still has a member in common with it.
// Spares, and members whose last superblock records themselves failed
// (written by the array they left), never diverge.
//
// A member that left long ago, after which every member it knew left too
// while members it recorded failed came back (a 3-way mirror losing each
// member in turn), looks the same from the two superblocks alone; Assemble
// accepts it when a member given bridges the two (see bridged), and
// otherwise leaving it out, or --force (which keeps the freshest side),
// assembles the array.
func Diverged(a, b *Superblock) bool {
	if a.IsSpare() || b.IsSpare() {
		return false
	}
	ina, inb := inArray(a), inArray(b)
	if !ina[a.MemberUUID] || !inb[b.MemberUUID] {
		// Its last superblock records itself failed: written by the
		// array it left, it did not run on its own since.
		return false
	}
	if intersects(ina, inb) {
		return false
	}
	xa, xb := excludes(a, inb), excludes(b, ina)
	return xa && xb || xa && replaced(b, a) || xb && replaced(a, b)
}

// replaced reports whether sb's table gives a role to another member than
// the one other's table holds in it: sb's side put another device in the
// role of a member of other's side (a spare, replace), which overwrote
// the record of that member's failure.
func replaced(sb, other *Superblock) bool {
	for r := 0; r < int(sb.Members) && r < int(other.Members); r++ {
		e, o := sb.Roles[r], other.Roles[r]
		if (e.State == RoleActive || e.State == RoleRebuilding) && (o.State == RoleActive || o.State == RoleRebuilding) && e.Member != o.Member {
			return true
		}
	}
	return false
}

// bridged reports whether a member given ran with members of both a's and
// b's tables (itself included) after the older of a and b was written: then a and b are one
// history (every member a knew left, one by one, while members it had
// recorded failed came back), not a split. After a real split, each side's
// first generation records the other side gone, so a member written later
// than both sides' split holds members of one side only, and a member
// written before the split is older than both a and b.
func bridged(ms []MemberSB, a, b *Superblock) bool {
	ina, inb := inArray(a), inArray(b)
	for _, m := range ms {
		sb := m.SB
		if sb == a || sb == b || sb.IsSpare() || sb.Events <= min(a.Events, b.Events) {
			continue
		}
		in := inArray(sb)
		// The member itself ran with the array that wrote sb, even where
		// sb records it failed (it did not run on its own since): a
		// member failed after it had been with a's members and then with
		// b's bridges them too.
		in[sb.MemberUUID] = true
		if intersects(in, ina) && intersects(in, inb) {
			return true
		}
	}
	return false
}

func intersects(a, b map[[16]byte]bool) bool {
	for u := range a {
		if b[u] {
			return true
		}
	}
	return false
}

// forceKeep is the member a forced assembly keeps as authoritative: the
// first member of generation events holding a role (not refuted) whose own
// table names it in that role as active or rebuilding; failing that (every
// such member records itself failed: ErrFailedMember), the first holding
// a role. A member recording its own failure is not preferred to one in
// sync at the same generation: its data stopped at the failure, and
// trusted it would be served, and resynced over the survivor's writes.
func forceKeep(ms []MemberSB, events uint64, refuted map[string]bool) *MemberSB {
	var first *MemberSB
	for i := range ms {
		m := &ms[i]
		if m.SB.Events != events || m.SB.IsSpare() || refuted[m.Path] {
			continue
		}
		if e := m.SB.Roles[m.SB.Role]; e.Member == m.SB.MemberUUID && (e.State == RoleActive || e.State == RoleRebuilding) {
			return m
		}
		if first == nil {
			first = m
		}
	}
	return first
}

// splitBrain returns an ErrSplitBrain error if two of the members
// diverged (see Diverged) and no member given bridges them (bridged).
func splitBrain(ms []MemberSB, fsb *Superblock, kept *MemberSB) error {
	keep := "" // what --force keeps
	if kept != nil {
		keep = kept.Path
	}
	for i := range ms {
		for j := i + 1; j < len(ms); j++ {
			a, b := &ms[i], &ms[j]
			if !Diverged(a.SB, b.SB) || bridged(ms, a.SB, b.SB) {
				continue
			}
			var all []string
			for _, m := range ms {
				all = append(all, m.Path)
			}
			return fmt.Errorf("%w in array %s: %s (events %d) and %s (events %d) each ran without the other (one records the other's side failed or missing, and the other's side records it so too, or gave its role to another device), so their data may differ; if one of them is only an old member left out long ago, the member that ran with both sides is not given; give only one side's members to keep that side, or add --force %s to keep the freshest, %s, and fully rebuild the others from it",
				ErrSplitBrain, arrayDesc(fsb), a.Path, a.SB.Events, b.Path, b.SB.Events, strings.Join(all, " "), keep)
		}
	}
	return nil
}
