package array

import (
	"errors"
	"fmt"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// The write-hole log of a raid5/6 array at run time (docs/raid56.md, the
// write hole): the queues write entries (engine.ParityExecutor.EnableLog),
// each in its own ring of the members' log areas, numbered by one clock;
// a goroutine of the array, the checkpointer, writes the checkpoint below
// which every entry is dead to every member's log header, so that the
// rings can take that space again.
type parityLog struct {
	clock *engine.ParityLogClock
	// rings: per queue, its ring; a queue started again (the device
	// served again by this process) goes on in the same one, whose live
	// entries a new ring would overwrite before a checkpoint passed
	// them.
	rings []*engine.ParityLogRing
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	// hold, when not 0, is the number every ring starts with an entry
	// of, filling it, so that it takes nothing until a checkpoint
	// passes that number (Array.holdLog).
	hold uint64
}

// parityLogBytes is the size of each member's write-hole log area for
// members of memberBytes (the smallest) and geometry g: 1/512 of the
// member, and room for ublk's default number of queues to hold two
// writes' entries each (of ublk's default size); 256 KiB to
// engine.MaxLogBytes (64 MiB from 32 GiB members on), and at most a
// quarter of the member; whole pages. (A queue whose ring cannot hold a
// write's entries is refused when the array is served.)
func parityLogBytes(memberBytes uint64, g engine.ParityGeometry) uint64 {
	rings := uint64(ublk.MaxDefaultQueues) * 2 * uint64(g.ParityLogBytesPerRequest(ublk.DefaultMaxIOBytes))
	n := max(memberBytes/512, engine.ParityLogHeaderSize+rings, 256<<10)
	return min(n, engine.MaxLogBytes, max(memberBytes/4, 256<<10)) &^ 4095
}

// parityGeometryOf is the geometry a create of spec on members members
// makes (its member size left out: the log's size does not depend on it).
func parityGeometryOf(spec CreateSpec, members int) engine.ParityGeometry {
	return engine.ParityGeometry{Level: spec.Level, Members: members, Layout: spec.ParityLayout, ChunkSectors: spec.ChunkSectors}
}

// SetQueueCount tells a raid5/6 array how many queues will serve it
// (ublk.QueueCounter: before the first queue), so that each gets its
// ring of the write-hole log.
func (a *Array) SetQueueCount(n int) error {
	a.plogMu.Lock()
	defer a.plogMu.Unlock()
	if a.plog != nil && n != a.logQueues {
		return fmt.Errorf("array: %d queues, but the write-hole log has rings for %d", n, a.logQueues)
	}
	a.logQueues = n
	return nil
}

// ringBytes is the size of each of k queues' rings in a write-hole log
// area of logBytes.
func ringBytes(logBytes uint64, k int) uint64 {
	return (logBytes - engine.ParityLogHeaderSize) / uint64(k) &^ 4095
}

// logRingsFit refuses k queues serving writes of up to maxIO bytes when
// a ring of a log area of logBytes cannot hold one write's entries. k or
// maxIO 0: not known, nothing checked.
func logRingsFit(logBytes uint64, g engine.ParityGeometry, k, maxIO int) error {
	if k <= 0 || maxIO <= 0 || logBytes == 0 {
		return nil
	}
	need := g.ParityLogBytesPerRequest(maxIO)
	if logBytes < engine.ParityLogHeaderSize || ringBytes(logBytes, k) < uint64(need) {
		return fmt.Errorf("array: the write-hole log area (%d bytes) is too small for %d queues: each needs %d bytes for writes of %d bytes; serve it with fewer queues or smaller I/O",
			logBytes, k, need, maxIO)
	}
	return nil
}

// parityLogRing is the ring of queue id (of queues serving writes of up
// to maxIO bytes), starting the run-time log with the first.
func (a *Array) parityLogRing(id, maxIO int) (*engine.ParityLogRing, *parityLog, error) {
	a.plogMu.Lock()
	defer a.plogMu.Unlock()
	k := a.logQueues
	if k <= 0 {
		k = ublk.MaxDefaultQueues
	}
	if id >= k {
		return nil, nil, fmt.Errorf("array: queue %d, but the write-hole log has rings for %d queues", id, k)
	}
	if err := logRingsFit(a.logBytes, *a.Engine.Parity, k, maxIO); err != nil {
		return nil, nil, err
	}
	size := ringBytes(a.logBytes, k)
	need := a.Engine.Parity.ParityLogBytesPerRequest(maxIO)
	if a.plog == nil {
		a.logQueues = k
		pl := &parityLog{clock: engine.NewParityLogClock(a.logNext, k), rings: make([]*engine.ParityLogRing, k),
			kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		if a.logHold {
			pl.hold = pl.clock.TakeN(1)
		}
		a.plog = pl
		go a.runCheckpointer(pl)
	}
	pl := a.plog
	if pl.rings[id] == nil {
		ring, err := engine.NewParityLogRing(engine.ParityLogHeaderSize+uint64(id)*size, size, need)
		if err != nil {
			return nil, nil, err
		}
		if pl.hold != 0 {
			ring.Take(pl.hold, int(size))
		}
		pl.rings[id] = ring
	}
	return pl.rings[id], pl, nil
}

// holdLog keeps the write-hole log's checkpoint from moving until the
// next superblock write (releaseLogHold), and the run-time rings full
// until then (recoverParityLog: a role is out whose log area was not
// read, or failed; before the queues start).
func (a *Array) holdLog() {
	a.logHold = true
	a.logHeld.Store(true)
}

// releaseLogHold ends holdLog's hold: the superblocks on disk now record
// the roles out. The checkpointer is asked for a checkpoint, which frees
// the rings. Called with a.mu held.
func (a *Array) releaseLogHold() {
	if !a.logHeld.Swap(false) {
		return
	}
	a.plogMu.Lock()
	pl := a.plog
	a.plogMu.Unlock()
	if pl != nil {
		pl.wantCheckpoint()
	}
}

// wantCheckpoint asks the checkpointer for a checkpoint (a ring is full,
// or filling). Queue threads; never blocks.
func (pl *parityLog) wantCheckpoint() {
	select {
	case pl.kick <- struct{}{}:
	default:
	}
}

// runCheckpointer persists the log's checkpoint when asked, and every
// second, when it moved: to every member in sync or rebuilding, then the
// queues are woken to free their rings below it.
func (a *Array) runCheckpointer(pl *parityLog) {
	defer close(pl.done)
	every := a.logCheckpointEvery
	if every == 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var b []byte // (writeLogCheckpoint's buffer)
	for {
		select {
		case <-pl.stop:
			return
		case <-pl.kick:
		case <-t.C:
		}
		cp := pl.clock.Checkpoint()
		if cp <= pl.clock.Persisted() {
			continue
		}
		ok, err := a.writeLogCheckpoint(cp, &b)
		switch {
		case ok:
			pl.clock.SetStuck(nil)
			pl.clock.SetPersisted(cp)
			a.wakeQueues()
		case err != nil:
			// No checkpoint until the member takes one (tried again
			// every tick): writes waiting for ring space fail instead
			// of waiting for ever (md fails a write the last copy
			// fails).
			pl.clock.SetStuck(err)
			a.wakeQueues()
		}
	}
}

// errLogHeaderLate: a checkpoint write given up after the member timeout
// is still out on the member; no newer one is sent until it returns.
var errLogHeaderLate = errors.New("a write of the write-hole log's checkpoint given up after the member timeout is still out on it")

// writeLogCheckpoint writes checkpoint cp to the log header of every
// member in sync or rebuilding; it reports whether cp is durable on all
// of them (a member whose write fails is failed, unless it is the last
// copy of something: then cp is not recorded as persisted, and the log
// does not reuse entries a recovery could still need: the error returned
// says so, and the checkpointer makes the writes that would wait for
// ring space fail with it, ParityLogClock.SetStuck).
//
// Each member takes the header in one durable (FUA) write, with no flush
// of its cache: what the checkpoint says durable already is, every data
// and parity write that holds an entry being FUA (ParityExecutor.addIO).
// *bp is the header's buffer, kept from one checkpoint to the next; a
// write given up after the member timeout may still read it, and then
// the next checkpoint takes another. Until such a write returns, the
// member takes no other (errLogHeaderLate: a member kept as the last copy
// then holds the checkpoint back, as when its write fails).
func (a *Array) writeLogCheckpoint(cp uint64, bp *[]byte) (bool, error) {
	// One at a time, never back: a smaller checkpoint written after a
	// larger one would make dead entries live again.
	a.logHeaderMu.Lock()
	defer a.logHeaderMu.Unlock()
	if a.logHeld.Load() {
		return false, nil // (holdLog: not before a superblock write)
	}
	if cp <= a.logHeaderCP {
		return true, nil
	}
	if *bp == nil {
		*bp = engine.AlignedBuf(engine.ParityLogHeaderSize)
	}
	b := *bp
	h := engine.ParityLogHeader{Array: a.logUUID, Checkpoint: cp}
	if err := h.Encode(b); err != nil {
		return false, err
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return false, nil
	}
	members := append([]*Member(nil), a.Members...)
	a.mu.Unlock()
	st := a.Engine.State()
	var roles []int
	for r, m := range members {
		if m != nil && writable(st.Members[r]) {
			roles = append(roles, r)
		}
	}
	// (A member that does not answer is given up after the member
	// timeout, as for the bitmap's writes.)
	write := func(r int) error {
		m := members[r]
		if !m.logHeaderWriting.CompareAndSwap(false, true) {
			return errLogHeaderLate
		}
		defer m.logHeaderWriting.Store(false)
		return m.WriteAtDurable(b, int64(a.logOffset))
	}
	// In two rounds, half the members each: a 4 KiB write is not atomic
	// on every device, and a power cut tearing every header at once
	// would leave a recovery no checkpoint (it then replays nothing,
	// and refuses a dirty degraded array). One round torn, the other
	// holds this checkpoint or the one before, which the rings still
	// honour (they reuse space only once this one is durable on all).
	half := (len(roles) + 1) / 2
	errs := writeAll(members, roles[:half], a.MemberTimeout, write)
	for r, err := range writeAll(members, roles[half:], a.MemberTimeout, write) {
		if err != nil {
			errs[r] = err
		}
	}
	for _, r := range roles {
		if errors.Is(errs[r], errMemberTimeout) {
			*bp = nil // (still read by the write left behind)
		}
	}
	ok := true
	var stuck error
	for _, r := range roles {
		if errs[r] == nil {
			continue
		}
		a.mu.Lock()
		same := a.Members[r] == members[r]
		a.mu.Unlock()
		if !same {
			continue // (it left the role meanwhile: its header no longer counts)
		}
		st2, changed, _ := a.Engine.FailRedundant(r)
		if changed {
			go a.persist(st2)
		}
		if st2.Members[r].State == engine.MemberActive {
			ok = false
			stuck = fmt.Errorf("%s, kept as the last copy, failed the write of the write-hole log's checkpoint: %w", members[r].Path, errs[r])
		}
	}
	if ok {
		a.logHeaderCP = cp
		a.logCPs.Add(1)
	}
	return ok, stuck
}

// checkpointLog persists the write-hole log's checkpoint now, before a
// superblock update (persist): the entries of the writes that ended are
// dead before the superblocks record a member failed or out. Recovery
// cannot replay an entry whose stripe needs a chunk of a member recorded
// failed, and refuses a dirty degraded array whose log holds one without
// force; a write that ended a moment before the failure left such an
// entry live until the checkpointer's next tick, so a crash in that
// second refused an array that md (PPL) starts and that has nothing to
// replay. Entries of writes still out stay live, as they must.
func (a *Array) checkpointLog() {
	a.plogMu.Lock()
	pl := a.plog
	a.plogMu.Unlock()
	if pl == nil {
		return
	}
	cp := pl.clock.Checkpoint()
	if cp <= pl.clock.Persisted() {
		return
	}
	var b []byte
	if ok, _ := a.writeLogCheckpoint(cp, &b); ok {
		// (A failure leaves the rest to the checkpointer, which retries
		// and records why the log is stuck.)
		pl.clock.SetPersisted(cp)
		a.wakeQueues()
	}
}

// stopParityLog stops the checkpointer and persists a last checkpoint
// (Close, before the members are closed).
func (a *Array) stopParityLog() {
	a.plogMu.Lock()
	pl := a.plog
	a.plog = nil
	a.plogMu.Unlock()
	if pl == nil {
		return
	}
	close(pl.stop)
	<-pl.done
	// The entries of the writes that ended are dead: a last checkpoint
	// past them, so that the next assembly replays nothing after a
	// clean stop (a write still out holds its entries live).
	if cp := pl.clock.Checkpoint(); cp > pl.clock.Persisted() {
		var b []byte
		if ok, _ := a.writeLogCheckpoint(cp, &b); ok {
			pl.clock.SetPersisted(cp)
		}
	}
}

// resetLogArea empties the write-hole log area of m, a device about to
// take a role of a raid5/6 array: entries it holds from an earlier stint
// in the array (a re-add, a former member made a spare) are this array's
// and would be replayed at the next assembly, though the stripes they
// describe have been written since, under numbers that may repeat
// theirs. Its header gets the first checkpoint.
func (a *Array) resetLogArea(m *Member) error {
	if a.logBytes == 0 {
		return nil
	}
	const piece = 1 << 20
	zero := make([]byte, min(piece, a.logBytes))
	h := engine.ParityLogHeader{Array: a.logUUID, Checkpoint: 1}
	if err := h.Encode(zero); err != nil {
		return err
	}
	err := writeAll([]*Member{m}, []int{0}, a.MemberTimeout, func(int) error {
		for off := uint64(0); off < a.logBytes; off += piece {
			n := min(piece, a.logBytes-off)
			if err := m.WriteBlockSync(int64(a.logOffset+off), zero[:n]); err != nil {
				return err
			}
			if off == 0 {
				clear(zero[:engine.ParityLogHeaderSize])
			}
		}
		return nil
	})[0]
	if err != nil {
		return fmt.Errorf("%s: emptying its write-hole log area: %w", m.Path, err)
	}
	return nil
}
