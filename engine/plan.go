package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// IOKind is what a member operation does.
type IOKind uint8

// Member operation kinds.
const (
	IORead IOKind = iota
	IOWrite
	IOFlush
	IODiscard
	IOWriteZeroes
)

func (k IOKind) String() string {
	return [...]string{"read", "write", "flush", "discard", "write-zeroes"}[k]
}

// MemberIO is one member operation of a plan. Sector is relative to the
// member's data offset; BufOff is the byte offset in the request buffer
// of the data read or written (reads and writes only).
type MemberIO struct {
	Member int32
	Kind   IOKind
	FUA    bool
	// Log: a write of a raid5/6 write-hole log entry; Sector counts from
	// the start of the member's log area, not of its data area.
	Log     bool
	Sector  uint64
	Sectors uint32
	BufOff  uint32
	// Retried reads: Avoid lists members that failed reading exactly this
	// range (never asked again); Deprio lists members that failed reading
	// a larger range containing it (asked only if no other copy is left).
	Avoid, Deprio uint64
	// Busy lists the members of Avoid and Deprio that only answered
	// EAGAIN (could not take the read, no error of their own): not
	// copies to repair.
	Busy uint64
}

// MemberState is a member's role state as the planner sees it.
type MemberState uint8

// Member states.
const (
	MemberActive     MemberState = iota // in sync: read and written
	MemberRebuilding                    // written; read only below RebuildOffset
	MemberFaulty                        // failed: never used
	MemberMissing                       // absent: never used
)

func (s MemberState) String() string {
	return [...]string{"active", "rebuilding", "faulty", "missing"}[s]
}

// MemberStatus is one member's entry in an ArrayState.
type MemberStatus struct {
	State MemberState
	// RebuildOffset: a rebuilding member holds current data below this
	// member sector (data-relative); reads above it go to other copies.
	RebuildOffset uint64
	// Since is the generation at which the member entered State, kept by
	// Array (a value set by the caller is ignored): a member failed and
	// put back, a new device in its role, has a new one even if its State
	// is the same as before (a rebuild job tells its target apart so).
	Since uint64
}

func (m MemberStatus) readable(end uint64) bool {
	return m.State == MemberActive || (m.State == MemberRebuilding && end <= m.RebuildOffset)
}

func (m MemberStatus) writable() bool {
	return m.State == MemberActive || m.State == MemberRebuilding
}

// ArrayState is an immutable snapshot of the members' states. Queue
// threads load the current one with one atomic read per request.
type ArrayState struct {
	Gen     uint64
	Members []MemberStatus
	// DropGen is the generation at which a member last stopped being
	// written (failed, or made faulty or missing). A write planned with
	// this state skips that member, so it must not be acknowledged before
	// DropGen is durable: a crash in between would bring the member back
	// as in sync, without the write.
	DropGen uint64
}

// next is the state after old with members (which it keeps): Since and
// DropGen follow the changes from old.
func next(old *ArrayState, members []MemberStatus) *ArrayState {
	st := &ArrayState{Gen: old.Gen + 1, Members: members, DropGen: old.DropGen}
	for i := range members {
		m := &members[i]
		if i < len(old.Members) && m.State == old.Members[i].State {
			m.Since = old.Members[i].Since
			continue
		}
		m.Since = st.Gen
		if i < len(old.Members) && old.Members[i].writable() && !m.writable() {
			st.DropGen = st.Gen
		}
	}
	return st
}

// ErrNoCopy means no member holding a copy of the data can serve it: the
// request fails with EIO, never with stale or zero data.
var ErrNoCopy = errors.New("no surviving copy of the data")

// Array is the planning view of one array: geometry plus member states.
// Planning methods are safe for concurrent use from every queue thread;
// state changes (Fail, SetState) are serialised by a mutex off the I/O path.
type Array struct {
	Geo Geometry
	// Parity, set by NewParityArray, is the geometry of a raid5/6 array;
	// Geo is then the zero Geometry, and only the state methods (State,
	// SetState, Update, Fail, FailRedundant, CoveredWithout) and PlanFlush
	// apply: parity requests are planned by ParityGeometry's planners.
	Parity *ParityGeometry
	state  atomic.Pointer[ArrayState]
	mu     sync.Mutex
	broken atomic.Bool
}

// MarkBroken records, in memory only, that a raid0 member failed a write,
// flush or discard (md's MD_BROKEN): every later write, flush, discard and
// write-zeroes fails, reads go on. Nothing is persisted and no member is
// failed: the next assembly serves the array again, as md's does.
func (a *Array) MarkBroken() { a.broken.Store(true) }

// Broken reports whether MarkBroken was called.
func (a *Array) Broken() bool { return a.broken.Load() }

// NewArray returns an Array with every member active.
func NewArray(g Geometry) (*Array, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	a := &Array{Geo: g}
	st := &ArrayState{Gen: 1, Members: make([]MemberStatus, g.Members)}
	a.state.Store(st)
	return a, nil
}

// NewParityArray returns the Array of a raid5/6 array with every member
// active: its member states, failed as md fails them (FailRedundant keeps
// a member whose loss would leave some stripe with more members lost than
// its parity covers).
func NewParityArray(g ParityGeometry) (*Array, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	a := &Array{Parity: &g}
	st := &ArrayState{Gen: 1, Members: make([]MemberStatus, g.Members)}
	a.state.Store(st)
	return a, nil
}

// State returns the current snapshot.
func (a *Array) State() *ArrayState { return a.state.Load() }

// SetState replaces the member states (assembly, rebuild progress).
func (a *Array) SetState(members []MemberStatus) *ArrayState {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.state.Load()
	st := next(old, append([]MemberStatus(nil), members...))
	a.state.Store(st)
	return st
}

// Update applies f to a copy of the current member states and installs
// the result as the next generation, atomically with respect to Fail and
// other updates.
func (a *Array) Update(f func(ms []MemberStatus)) *ArrayState {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.state.Load()
	ms := append([]MemberStatus(nil), old.Members...)
	f(ms)
	st := next(old, ms)
	a.state.Store(st)
	return st
}

// Fail marks member m faulty and returns the new snapshot, or the current
// one if m was already not in use. It reports whether the state changed.
func (a *Array) Fail(m int) (*ArrayState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.state.Load()
	if old.Members[m].State == MemberFaulty || old.Members[m].State == MemberMissing {
		return old, false
	}
	ms := append([]MemberStatus(nil), old.Members...)
	ms[m] = MemberStatus{State: MemberFaulty}
	st := next(old, ms)
	a.state.Store(st)
	return st, true
}

// FailRedundantIf is FailRedundant while member m's state is still the
// one it entered at generation since (MemberStatus.Since); otherwise it
// changes nothing and reports stale. A device is put in a role only once
// the role is faulty or missing (a state change), so an unchanged Since
// means the role still holds the device the caller saw there: the check
// and the change are one step under the array's lock, where a separate
// look at the role's device and then FailRedundant could fail a device
// put in the role between the two.
func (a *Array) FailRedundantIf(m int, since uint64) (st *ArrayState, changed, out, stale bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.state.Load()
	if old.Members[m].Since != since {
		return old, false, false, true
	}
	st, changed, out = a.failRedundantLocked(old, m)
	return st, changed, out, false
}

// FailRedundant marks member m faulty unless it holds the only in-sync
// copy of some data (md never fails its last in-sync device: the request
// that hit the error fails instead). The check and the change are one
// step under the array's lock. It returns the current snapshot, whether
// the state changed, and whether m is (now, or already) out of use; false
// means m was kept because it is the last copy.
func (a *Array) FailRedundant(m int) (*ArrayState, bool, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failRedundantLocked(a.state.Load(), m)
}

// failRedundantLocked is FailRedundant from state old, a.mu held.
func (a *Array) failRedundantLocked(old *ArrayState, m int) (*ArrayState, bool, bool) {
	if s := old.Members[m].State; s == MemberFaulty || s == MemberMissing {
		return old, false, true
	}
	if old.Members[m].State == MemberActive && !a.coveredWithout(old, m) {
		return old, false, false
	}
	ms := append([]MemberStatus(nil), old.Members...)
	ms[m] = MemberStatus{State: MemberFaulty}
	st := next(old, ms)
	a.state.Store(st)
	return st, true, true
}

// CoveredWithout reports whether every chunk keeps an active copy on a
// member other than m in the current state.
func (a *Array) CoveredWithout(m int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.coveredWithout(a.state.Load(), m)
}

// coveredWithout reports whether every chunk keeps an active copy on a
// member other than m in st.
func (a *Array) coveredWithout(st *ArrayState, m int) bool {
	if a.Parity != nil {
		// Every stripe holds a chunk on every member: at most
		// ParityMembers of them may be out of sync (a rebuilding member
		// counts: it is not, above its rebuild offset).
		lost := 1
		for i, ms := range st.Members {
			if i != m && ms.State != MemberActive {
				lost++
			}
		}
		return lost <= a.Parity.ParityMembers()
	}
	return a.Geo.EveryChunk(func(copies []Location) bool {
		for _, l := range copies {
			if l.Member != m && st.Members[l.Member].State == MemberActive {
				return true
			}
		}
		return false
	})
}

// MaxPlanIOs is the capacity a plan needs for requests of up to maxBytes.
func (a *Array) MaxPlanIOs(maxBytes int) int {
	if a.Parity != nil {
		return a.Parity.maxPlanIOs(maxBytes)
	}
	pieces := 1
	if a.Geo.Level != Level1 {
		pieces = maxBytes/int(a.Geo.ChunkSectors<<9) + 2
	}
	return max(pieces*a.Geo.Copies(), a.Geo.Members)
}

// Balancer picks which copy serves a read. Implementations are per queue
// (no sharing between queue threads).
type Balancer interface {
	// Pick returns the index into locs of the copy to read; ok lists which
	// entries are eligible (at least one is).
	Pick(locs []Location, ok uint32, sectors uint32) int
}

// Scratch is per-thread working space for planning (so planning does not
// allocate); each queue owns one.
type Scratch struct{ locs [MaxCopies]Location }

// PlanRead appends to ios the member reads that serve array sectors
// [sector, sectors), one per chunk piece, choosing with bal among readable
// copies on members not in avoid, preferring members not in deprio. It
// returns ErrNoCopy if some piece has no usable copy.
func (a *Array) PlanRead(sc *Scratch, st *ArrayState, sector uint64, sectors uint32, avoid, deprio uint64, bal Balancer, ios []MemberIO) ([]MemberIO, error) {
	buf := &sc.locs
	var off uint32
	for sectors > 0 {
		n := uint32(min(uint64(sectors), a.Geo.ChunkEnd(sector)))
		locs := a.Geo.Locate(sector, buf[:0])
		var ok, pref uint32
		for i, l := range locs {
			bit := uint64(1) << uint(l.Member)
			if avoid&bit == 0 && st.Members[l.Member].readable(l.Sector+uint64(n)) {
				ok |= 1 << uint(i)
				if deprio&bit == 0 {
					pref |= 1 << uint(i)
				}
			}
		}
		if ok == 0 {
			return ios, fmt.Errorf("array sectors %d+%d: %w", sector, n, ErrNoCopy)
		}
		if pref != 0 {
			ok = pref
		}
		i := 0
		if bal != nil {
			i = bal.Pick(locs, ok, n)
		} else {
			for ok&(1<<uint(i)) == 0 {
				i++
			}
		}
		ios = append(ios, MemberIO{Member: int32(locs[i].Member), Kind: IORead, Sector: locs[i].Sector, Sectors: n,
			BufOff: off << 9, Avoid: avoid, Deprio: deprio})
		sector += uint64(n)
		sectors -= n
		off += n
	}
	return ios, nil
}

// PlanWrite appends to ios the member operations of kind (IOWrite,
// IODiscard, IOWriteZeroes) for array sectors [sector, sector+sectors):
// every writable copy of every chunk piece. A piece with no writable copy
// fails the plan with ErrNoCopy.
func (a *Array) PlanWrite(sc *Scratch, st *ArrayState, kind IOKind, sector uint64, sectors uint32, fua bool, ios []MemberIO) ([]MemberIO, error) {
	buf := &sc.locs
	var off uint32
	for sectors > 0 {
		n := uint32(min(uint64(sectors), a.Geo.ChunkEnd(sector)))
		locs := a.Geo.Locate(sector, buf[:0])
		wrote := false
		for _, l := range locs {
			if st.Members[l.Member].writable() {
				ios = append(ios, MemberIO{Member: int32(l.Member), Kind: kind, FUA: fua, Sector: l.Sector, Sectors: n, BufOff: off << 9})
				wrote = true
			}
		}
		if !wrote {
			return ios, fmt.Errorf("array sectors %d+%d: %w", sector, n, ErrNoCopy)
		}
		sector += uint64(n)
		sectors -= n
		off += n
	}
	return ios, nil
}

// PlanFlush appends a flush of every writable member. With no writable
// member it returns ErrNoCopy; so it does on a raid0 with a member out
// (broken): that member held the only copy of its chunks, so the writes
// acknowledged before its failure that were in its cache cannot be made
// durable (md fails every write of a broken raid0, flushes included).
func (a *Array) PlanFlush(st *ArrayState, ios []MemberIO) ([]MemberIO, error) {
	n := len(ios)
	for m, s := range st.Members {
		if s.writable() {
			ios = append(ios, MemberIO{Member: int32(m), Kind: IOFlush})
		} else if a.Parity == nil && a.Geo.Level == Level0 {
			return ios[:n], fmt.Errorf("raid0 member %d is %v: %w", m, s.State, ErrNoCopy)
		}
	}
	if len(ios) == n {
		return ios, ErrNoCopy
	}
	return ios, nil
}

// LeastLoaded is a Balancer that reads from the eligible copy with the
// fewest sectors in flight on this queue (ties: the first). The executor
// uses Balance, which weights this by measured member latency and falls
// back to it without a clock.
type LeastLoaded struct {
	Inflight []int64 // per member, maintained by the executor
}

// Pick implements Balancer.
func (b *LeastLoaded) Pick(locs []Location, ok uint32, _ uint32) int {
	best := -1
	for i, l := range locs {
		if ok&(1<<uint(i)) == 0 {
			continue
		}
		if best < 0 || b.Inflight[l.Member] < b.Inflight[locs[best].Member] {
			best = i
		}
	}
	return best
}

// LowestMember is the Balancer of reads that must be stable while copies
// may differ (regions awaiting resync): the eligible copy on the
// lowest-numbered member, the copy resync copies from.
type LowestMember struct{}

// Pick implements Balancer.
func (LowestMember) Pick(locs []Location, ok uint32, _ uint32) int {
	best := -1
	for i, l := range locs {
		if ok&(1<<uint(i)) != 0 && (best < 0 || l.Member < locs[best].Member) {
			best = i
		}
	}
	return best
}
