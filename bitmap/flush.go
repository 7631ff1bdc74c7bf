package bitmap

import (
	"time"
)

// Batch is a group of bitmap block writes: each of Blocks is to be written
// to every present member (with FUA, or write then flush where a member
// has a volatile cache), all in parallel. When every present member has
// completed every block, the caller calls Committed. A block is in at most
// one batch in flight, so batches may be in flight together (their blocks
// are disjoint) and may commit in any order.
type Batch struct {
	// Seq is the batch's sequence number (in the blocks' trailers).
	Seq uint64
	// Blocks are the writes; Data is BlockSize bytes, aligned to
	// min(BlockSize, 4096), owned by the Bitmap and unchanged until
	// Committed.
	Blocks []Block
	// Events is the header's events when the batch writes the header
	// (block 0), else 0. Superblocks with that generation may be written
	// once the batch has committed.
	Events uint64

	sets     []int32 // regions that become durable-dirty at commit
	clears   []int32 // regions the batch writes clean
	cleared  uint64  // the header's events cleared, when it writes the header
	inflight bool
}

// Block is one bitmap block write.
type Block struct {
	// Index is the block number: 0 the header, 1.. the data blocks.
	Index int
	// Offset is the byte offset on the member.
	Offset uint64
	Data   []byte

	rewrite uint64 // the RewriteAll generation the block's data satisfies
}

// Prepare collects every region requested dirty since the last batch
// (writes that StartWrite made wait), every cleared region (Tick) and any
// header or full rewrite, and returns the blocks to write, or nil if there
// is nothing to write. Blocks already in a batch in flight are left for a
// later Prepare (after that batch's Committed), with the requests for their
// regions: writes arriving while a block is being written join the next
// write of it, and a block is written once per batch however many of its
// regions changed. Flusher thread.
//
// Group commit is the caller's choice of when to call Prepare: right after
// a Notify (lowest latency; batches in flight together cover disjoint
// blocks) or only when no batch is in flight (classic group commit: one
// bitmap write in flight per member). Either way, call Prepare again after
// each Committed: requests for blocks that were busy are still pending.
func (b *Bitmap) Prepare() *Batch {
	b.mu.Lock()
	if len(b.pending) > 0 {
		keep := b.spare[:0]
		for _, r := range b.pending {
			blk := b.geo.BlockOf(int(r))
			if b.busy[blk] {
				keep = append(keep, r)
				continue
			}
			b.setDirty(int(r))
			b.changed[blk] = true
		}
		b.spare, b.pending = b.pending[:0], keep
	}
	b.mu.Unlock()

	var bt *Batch
	for i, ch := range b.changed {
		if !ch || b.busy[i] {
			continue
		}
		if i == 0 && b.rewriting() {
			// The header goes last: a copy whose header is current is
			// whole.
			continue
		}
		if bt == nil {
			bt = b.newBatch()
		}
		b.changed[i] = false
		b.busy[i] = true
		buf := b.bufs[i]
		if i == 0 {
			bt.cleared = b.eventsCleared.Load()
			EncodeHeader(buf, &b.geo, b.events, bt.cleared)
			bt.Events = b.events
		} else {
			EncodeBlock(buf, &b.geo, i, bt.Seq, b.image)
			// Every region this block says dirty is durable-dirty once it
			// is on every member.
			first, end := b.geo.BlockRegions(i)
			for r := first; r < end; r++ {
				if State(b.image[r]) == Dirty && b.words[r].Load()&flagDurable == 0 {
					bt.sets = append(bt.sets, int32(r))
				}
			}
		}
		bt.Blocks = append(bt.Blocks, Block{Index: i, Offset: b.geo.BlockOffset(i), Data: buf, rewrite: b.rewriteWant[i]})
	}
	if bt != nil {
		// Every cleared region's block is in the batch (clearIdle clears
		// none whose block is busy).
		bt.clears, b.clearedNow = append(bt.clears, b.clearedNow...), b.clearedNow[:0]
		b.stats.batches.Add(1)
		b.stats.blockWrites.Add(uint64(len(bt.Blocks)))
	}
	return bt
}

// setDirty makes region r dirty in the image (called with mu held, on the
// flusher thread), applying the hysteresis rule when it was clean.
func (b *Bitmap) setDirty(r int) {
	switch State(b.image[r]) {
	case Dirty:
		return
	case Clean:
		switch gap := b.now - b.cleanedAt[r]; {
		case gap < b.opts.MaxClearDelay:
			// Cleared too early: a longer delay would have kept it dirty.
			if b.level[r] < b.maxLevel {
				b.level[r]++
			}
			b.stats.redirtied.Add(1)
		case b.level[r] > 0:
			// Idle longer than any delay: clearing was right.
			b.level[r]--
		}
	case NeverWritten:
		b.words[r].And(^uint64(flagNever))
		b.never.Add(-1)
		if b.opts.FirstWrite != nil {
			b.opts.FirstWrite(r)
		}
	}
	b.image[r] = byte(Dirty)
	b.words[r].Or(flagDirty)
	b.dirty.Add(1)
}

// delay is region r's current clear delay.
func (b *Bitmap) delay(r int) time.Duration {
	return min(b.opts.ClearDelay<<b.level[r], b.opts.MaxClearDelay)
}

func (b *Bitmap) newBatch() *Batch {
	var bt *Batch
	if n := len(b.free); n > 0 {
		bt = b.free[n-1]
		b.free = b.free[:n-1]
	} else {
		bt = &Batch{}
	}
	b.seq++
	bt.Seq = b.seq
	bt.inflight = true
	return bt
}

// Committed is called when every block of bt is durable on every present
// member. It marks the regions the batch made dirty durable-dirty and
// appends to released the tokens of the waiting writes that may now
// proceed (every region of theirs durable-dirty), which the caller routes
// to their queues. bt must not be used afterwards. Flusher thread.
func (b *Bitmap) Committed(bt *Batch, released []Waiter) []Waiter {
	released, _ = b.retire(bt, true, released, nil)
	return released
}

// Failed is called instead of Committed when a block of bt did not reach
// a member that stays in sync (the last copy of some data, which the
// caller keeps): that member's copy would lack the batch's bits while it
// may be the only one trusted after a crash, so no region of the batch
// becomes durable-dirty. The writes waiting for those regions are appended
// to failed, to be failed unissued (md fails writes once its last device
// failed a bitmap write); the others keep waiting. The blocks are written
// again by a later Prepare (call it on the next Tick or Notify, not at
// once: the member may fail again; a full rewrite, and so the header, wait
// for them), and a later write to one of the regions requests it again.
// The caller need not hold superblock generations back for the header
// (Events): a member whose header is older than its superblock is not
// trusted at assembly, which is the cautious side. bt must not be used
// afterwards. Flusher thread.
func (b *Bitmap) Failed(bt *Batch, released, failed []Waiter) ([]Waiter, []Waiter) {
	return b.retire(bt, false, released, failed)
}

// Unclear makes the regions bt writes clean dirty again, and the header
// due again; call it before Committed or Failed. For a batch that a member
// failed (its flush or its block writes) while it keeps its role until the
// failure is recorded: the data writes of those regions may not be durable
// on it, so the clear must not count for it. A member that left with its
// superblock at the generation of the clear would otherwise be re-added
// from the bitmap without them (its events are not older than events
// cleared). Dirty again, the regions stay so while the member is missing
// (SetMissing), as md keeps bits while degraded, and a re-add copies them.
// The next batch writes their blocks and the header: a caller holding a
// superblock generation back until its header commits waits for that
// batch, so the generation recording the failure finds them dirty.
// Flusher thread.
//
// It reports whether bt cleared anything (else it changes nothing).
func (b *Bitmap) Unclear(bt *Batch) bool {
	if len(bt.clears) == 0 {
		return false
	}
	for _, r := range bt.clears {
		if State(b.image[r]) != Clean || b.words[r].Load()&flagDurable != 0 {
			continue // dirty again already
		}
		b.image[r] = byte(Dirty)
		b.words[r].Or(flagDirty)
		b.changed[b.geo.BlockOf(int(r))] = true
		b.dirty.Add(1)
	}
	b.changed[0] = true
	bt.clears = bt.clears[:0]
	return true
}

// retire ends bt, committed (ok) or failed (see Committed and Failed).
func (b *Bitmap) retire(bt *Batch, ok bool, released, failed []Waiter) ([]Waiter, []Waiter) {
	if !bt.inflight {
		panic("bitmap: Committed or Failed on a batch that is not in flight")
	}
	bt.inflight = false
	for _, blk := range bt.Blocks {
		b.busy[blk.Index] = false
		// A full rewrite counts a failed block as written too, so the
		// header is not held back behind it forever (superblock
		// generations wait for the header): the regions it sets are not
		// durable-dirty anyway.
		b.rewriteDone[blk.Index] = max(b.rewriteDone[blk.Index], blk.rewrite)
		if !ok {
			b.changed[blk.Index] = true // written again, from the image now
		}
	}
	if bt.Events != 0 && ok {
		// Only a committed header covers clears: a kept member that did
		// not take it still says the older events cleared (the header
		// is written again: changed above).
		b.stats.durableEvents.Store(bt.Events)
		b.durableCleared = max(b.durableCleared, bt.cleared)
	}
	var lost map[int32]bool
	if ok {
		for _, r := range bt.sets {
			b.words[r].Or(flagDurable)
		}
	} else {
		lost = make(map[int32]bool, len(bt.sets)) // a failure path: rare
		for _, r := range bt.sets {
			lost[r] = true
		}
	}
	b.mu.Lock()
	for _, r := range bt.sets {
		b.requested[r] = false
	}
	n := 0
	for _, w := range b.waiters {
		gone := false
		for r := w.first; lost != nil && r <= w.last && !gone; r++ {
			gone = lost[r]
		}
		switch {
		case gone:
			failed = append(failed, w.token)
		case b.allDurable(int(w.first), int(w.last)):
			released = append(released, w.token)
		default:
			b.waiters[n] = w
			n++
		}
	}
	clear(b.waiters[n:])
	b.waiters = b.waiters[:n]
	b.mu.Unlock()

	if !ok {
		// The blocks are written again by a later batch, with the clears.
		b.clearedNow = append(b.clearedNow, bt.clears...)
	}
	bt.Blocks = bt.Blocks[:0]
	bt.sets, bt.clears = bt.sets[:0], bt.clears[:0]
	bt.Events, bt.cleared = 0, 0
	b.free = append(b.free, bt)
	return released, failed
}

// Tick is called periodically (every TickInterval) with the time now (a
// monotonic clock: any origin, never decreasing). It notes which regions
// had writes since the last tick and clears, in the image, every region
// that is durable-dirty, has no write in flight, has had no write for its
// clear delay, does not need sync, and whose block is not being written,
// while no member is missing; then it returns Prepare().
//
// Events cleared (see format.go): regions are cleared in generation G
// (Events) only once a header saying events cleared G has committed. The
// first tick of a generation that finds a region to clear clears nothing:
// it sets events cleared to G and its batch writes the header; the
// following ticks clear. So a block saying a region is clean is never
// built before the header covering that clear is on every present member,
// at the cost of one header write per generation in which regions are
// cleared (generations change on member failures and re-adds, assembly
// and clean stops: rarely), and of one TickInterval more before the first
// clear of a generation. Writes never wait for it. Clearing never
// makes a write wait that would not have waited anyway: a write racing a
// clear either wins (the clear is not made) or finds the region not
// durable-dirty and waits for it to be made dirty again, after the clear's
// block write. Flusher thread.
//
// Hysteresis (md's cliff: with a fixed delay, a region revisited a little
// less often than the delay is cleared and set again on every visit, so
// every write to it waits): each region has a clear delay, ClearDelay<<level
// capped at MaxClearDelay. A region made dirty again less than
// MaxClearDelay after it was cleared was cleared too early: its level goes
// up (its delay doubles). One made dirty again later than that was rightly
// cleared: its level goes down one. So a region revisited every T <=
// MaxClearDelay stops being cleared after at most log2(T/ClearDelay)+1
// clear-and-set cycles, and a busy array settles with its busy regions
// dirty and no bitmap writes; a region written once is cleared ClearDelay
// after its write; and any region is dirty at most MaxClearDelay (plus a
// tick) after its last write, which bounds what a crash leaves to resync:
// the regions written in the last MaxClearDelay at most, those written in
// the last ClearDelay at least.
func (b *Bitmap) Tick(now time.Duration) *Batch {
	b.advance(now)
	b.clearIdle(false)
	return b.Prepare()
}

// ClearIdle is Tick without the delay: it clears every durable-dirty
// region with no write in flight (for a clean stop, once writes have
// stopped, so the next assembly finds nothing dirty). Regions whose block
// is in flight are left for the next call, and so are all of them when
// the header must first say a new events cleared (see Tick; ClearBlocked
// tells): commit the batch, then call again. Flusher thread.
func (b *Bitmap) ClearIdle(now time.Duration) *Batch {
	b.advance(now)
	b.clearIdle(true)
	return b.Prepare()
}

// TickInterval is how often to call Tick: a quarter of the clear delay, at
// most a second (a region is cleared up to one interval after its delay).
func (b *Bitmap) TickInterval() time.Duration {
	return min(b.opts.ClearDelay/4, time.Second)
}

func (b *Bitmap) advance(now time.Duration) {
	if !b.ticked {
		b.ticked = true
		b.now = now
		for r := range b.lastActive {
			b.lastActive[r] = now
		}
		return
	}
	b.now = max(b.now, now)
}

func (b *Bitmap) clearIdle(force bool) {
	now := b.now
	// Clears of this generation are covered by a committed header.
	covered := b.durableCleared >= b.events
	want := false
	for r := range b.words {
		w := b.words[r].Load()
		end := uint32(w >> endShift)
		busy := w&inflightMask != 0
		if busy || end != b.lastEnd[r] {
			b.lastEnd[r] = end
			b.lastActive[r] = now
			if busy || !force {
				continue
			}
		}
		if w&flagDurable == 0 || w&flagsSync != 0 {
			continue
		}
		if !force && now-b.lastActive[r] < b.delay(r) {
			continue
		}
		blk := b.geo.BlockOf(r)
		if b.busy[blk] || b.missing.Load() != 0 {
			continue
		}
		if !covered {
			want = true
			continue
		}
		// Fails if a write started since the load: it proceeds, the
		// region stays dirty.
		if !b.words[r].CompareAndSwap(w, w&^(flagDurable|flagDirty)) {
			continue
		}
		b.image[r] = byte(Clean)
		b.changed[blk] = true
		b.cleanedAt[r] = now
		b.clearedNow = append(b.clearedNow, int32(r))
		b.dirty.Add(-1)
		b.stats.cleared.Add(1)
	}
	if want && b.eventsCleared.Load() < b.events {
		// The header first (the clears wait for it to commit).
		b.eventsCleared.Store(b.events)
		b.changed[0] = true
	}
}

// ClearBlocked reports whether a clear is waiting for the header saying
// the current generation's events cleared to commit (ClearIdle cleared
// nothing for it: call it again once that batch committed). Flusher
// thread.
func (b *Bitmap) ClearBlocked() bool {
	return b.eventsCleared.Load() >= b.events && b.durableCleared < b.events
}

// EventsCleared returns the header's events cleared: the generation in
// which a region was last cleared, or is about to be. A member that left
// with superblock events older than this may have missed writes to
// regions clean now: a re-add must copy every written region to it, not
// only the dirty ones (md's events_cleared rule). Any thread.
func (b *Bitmap) EventsCleared() uint64 { return b.eventsCleared.Load() }

// SetEvents sets the events of the header and schedules a header write in
// a coming batch (after any RewriteAll's data blocks). Before writing
// superblocks with a new generation, call SetEvents with it and wait for
// the batch with that Events to commit. A new generation must be above
// Events() (which, after Load or Assemble, is above every header seen), so
// that a generation that reached a header but not the superblocks before a
// crash is never reused. Flusher thread.
func (b *Bitmap) SetEvents(events uint64) {
	b.events = max(b.events, events)
	b.changed[0] = true
}

// Events returns the header's events (as last set). Flusher thread.
func (b *Bitmap) Events() uint64 { return b.events }

// RewriteAll schedules a write of every block, for a member re-added or
// replaced whose copy is stale: the next batches write the whole copy to
// every present member, the header last, once every data block's write has
// committed (so a copy whose header is current is whole; combined with
// SetEvents, the batch carrying the new events commits only after the
// whole copy is on every present member). Flusher thread.
func (b *Bitmap) RewriteAll() {
	b.rewriteGen++
	for i := range b.changed {
		b.changed[i] = true
		b.rewriteWant[i] = b.rewriteGen
	}
}

// rewriting reports whether a data block's RewriteAll write has not
// committed yet.
func (b *Bitmap) rewriting() bool {
	for i := HeaderBlocks; i < len(b.rewriteWant); i++ {
		if b.rewriteDone[i] < b.rewriteWant[i] {
			return true
		}
	}
	return false
}

// HasWork reports whether a Prepare could return a batch now or after the
// batches in flight commit: changed blocks or pending requests. Flusher
// thread.
func (b *Bitmap) HasWork() bool {
	for _, ch := range b.changed {
		if ch {
			return true
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) > 0
}

// State returns region r's state in the image (durable once the batches in
// flight commit). Flusher thread.
func (b *Bitmap) State(r int) State { return State(b.image[r]) }

// DirtyRegions appends to dst the dirty regions: after Load, what resync
// must cover (from one chosen copy); after a re-add, what recovery must
// copy to the returning member. Flusher thread.
func (b *Bitmap) DirtyRegions(dst []int) []int {
	for r, s := range b.image {
		if State(s) == Dirty {
			dst = append(dst, r)
		}
	}
	return dst
}
