package array

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
)

// flusher is the write-intent bitmap's one flusher goroutine: it writes
// the bitmap's batches to every present member (durably, in parallel),
// hands the tokens of writes that waited back to their queues, clears idle
// regions on the bitmap's tick, and makes new superblock generations
// durable in the bitmap header before the superblocks are written.
//
// Every flusher-thread method of bitmap.Bitmap is called on this
// goroutine only. Queue threads reach it through notify (a non-blocking
// send from bitmap.Options.Notify); the superblock writer through reqs.
type flusher struct {
	a      *Array
	bm     *bitmap.Bitmap
	start  time.Time
	notify chan struct{}
	reqs   chan flushReq
	stop   chan struct{}
	done   chan struct{}

	released []bitmap.Waiter
	waiters  []flushReq
	// scratch: each role's copy of a batch's blocks, which its write
	// reads (the batch is the bitmap's again once committed, while a
	// write given up after the member timeout may still read its copy:
	// such a copy is left to it and the role gets a new one).
	scratch [][]byte
	views   [][]bitmap.Block
	// onMemberError is told of a member that failed a bitmap write (the
	// caller fails it and persists that off this goroutine); it reports
	// whether the member stays in sync (kept as the last copy of some
	// data).
	onMemberError func(role int, err error) (kept bool)
	// clearsAgain: a batch that may write regions clean failed (a member
	// kept in sync failed it); its blocks go out again in a later batch,
	// which must flush first too, whatever made it.
	clearsAgain bool
	// keptMissing: roles a failed batch marked missing for the bitmap
	// that stayed in sync (kept as the last copy): marked present again
	// once one takes a batch (commit), or no region would clear again
	// in this run.
	keptMissing uint64
	// failed: tokens of writes whose regions a batch could not make dirty
	// on every member in sync (Bitmap.Failed), routed as failures.
	failed []bitmap.Waiter
}

type flushReq struct {
	min   uint64 // generation wanted: at least this and above the header's (but see same)
	same  bool   // or the header's own, if that is min (see Array.unusedGen)
	clear bool   // clear every idle region first (clean stop)
	fn    func() // if set: just run it on the flusher goroutine
	got   uint64 // the generation made durable
	reply chan flushReq
	err   error
}

func newFlusher(a *Array, bm *bitmap.Bitmap) *flusher {
	return &flusher{a: a, bm: bm, start: time.Now(), notify: a.notify,
		reqs: make(chan flushReq), stop: make(chan struct{}), done: make(chan struct{})}
}

func (f *flusher) now() time.Duration { return time.Since(f.start) }

func (f *flusher) run() {
	defer close(f.done)
	tick := time.NewTicker(f.bm.TickInterval())
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			for _, w := range f.waiters {
				w.err = errors.New("bitmap flusher stopped")
				w.reply <- w
			}
			return
		case <-f.notify:
		case <-tick.C:
			if bt := f.bm.Tick(f.now()); bt != nil && !f.commit(bt, true) {
				continue // the next tick tries again
			}
		case r := <-f.reqs:
			if r.fn != nil {
				r.fn()
				r.reply <- r
				break
			}
			if r.clear {
				f.clearIdle()
			}
			if r.same && f.bm.Events() == r.min {
				r.got = r.min
			} else {
				r.got = max(r.min, f.bm.Events()+1)
			}
			f.bm.SetEvents(r.got)
			f.waiters = append(f.waiters, r)
		}
		for {
			bt := f.bm.Prepare()
			if bt == nil || !f.commit(bt, false) {
				break // (after a failed batch: on the next tick or notify)
			}
		}
	}
}

// commit writes bt's blocks to every present member, then commits it.
// clears says the batch may write regions clean (Tick, ClearIdle): each
// member is flushed first, so the data writes of those regions are
// durable before a bit says the copies agree (md writes bitmap pages with
// PREFLUSH). Batches that only set bits need no flush; one after a
// failed batch that may write regions clean does (clearsAgain).
//
// It reports false when a member that stays in sync failed the batch:
// the writes waiting for its regions fail (Bitmap.Failed).
func (f *flusher) commit(bt *bitmap.Batch, clears bool) bool {
	clears = clears || f.clearsAgain
	st := f.a.Engine.State()
	var roles []int
	// a.Members changes under a.mu, which a waiter may hold
	members := make([]*Member, len(st.Members))
	sent := make([]*roleDevice, len(st.Members)) // the devices written, as the roles held them
	for r := range st.Members {
		if d := f.a.current[r].Load(); d != nil && writable(st.Members[r]) {
			roles = append(roles, r)
			members[r] = d.m
			sent[r] = d
		}
	}
	if err := f.copyBlocks(bt, roles, len(members)); err != nil {
		for _, r := range roles {
			members[r] = nil // written by nobody: failed below
		}
	}
	views := f.views // the writes read this, never f's fields
	errs := writeAll(members, roles, f.a.MemberTimeout, func(r int) error {
		m := members[r]
		if m == nil {
			return errors.New("no buffer for the bitmap write")
		}
		if clears {
			start := time.Now()
			err := memberSync(m)
			f.a.countMemberOp(r, m, metrics.OpFlush, 0, time.Since(start), err)
			if err != nil {
				return err
			}
		}
		for _, b := range views[r] {
			start := time.Now()
			err := writeBitmapBlock(m, b.Data, int64(b.Offset))
			f.a.countMemberOp(r, m, metrics.OpWrite, len(b.Data), time.Since(start), err)
			if err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		if errors.Is(err, errMemberTimeout) {
			// The late write keeps reading its copy and views: both are
			// left to it (the other roles' views are made again).
			f.scratch[r], f.views = nil, nil
		}
	}
	for _, r := range roles {
		if errs[r] == nil {
			f.a.bitmapBlockWrites.Add(uint64(len(bt.Blocks)))
		}
	}
	kept, unclear := false, false
	for r := range st.Members {
		if bit := uint64(1) << uint(r); sent[r] == nil && f.bm.Missing()&bit == 0 {
			// Failed in memory (a queue's I/O error, `fail`), not yet
			// recorded (which marks it missing): the batch skipped it, and
			// its clears must not count for it (Unclear).
			f.bm.SetMissing(r, true)
			unclear = true
		}
	}
	for r, err := range errs {
		if err != nil {
			// The member is no longer present for the bitmap: the batch is
			// durable on the others. Failing it is recorded off this
			// goroutine (the superblock writer waits for us). A member
			// kept in sync (the last copy of some data) lacks the batch,
			// and a crash could leave it the only copy trusted: the
			// batch's writes fail instead of going out.
			f.bm.SetMissing(r, true)
			if f.a.current[r].Load() != sent[r] {
				// Its device left the role meanwhile (replaced, a spare,
				// re-added): the error is that device's, not the role's
				// new one, which gets the whole bitmap (rewriteAll).
				continue
			}
			if f.onMemberError != nil && f.onMemberError(r, err) {
				kept = true
				f.keptMissing |= 1 << uint(r)
			} else {
				// Failed: its data writes of the regions the batch writes
				// clean may not be durable there (a failed flush).
				unclear = true
			}
		}
	}
	for _, r := range roles {
		// A member kept in sync that failed an earlier batch takes this
		// one: present again for the bitmap. What the failed batch did
		// not write there is harmless: bits set for writes that failed
		// unissued, bits left dirty, a header older than the superblocks
		// (not trusted at assembly).
		if bit := uint64(1) << uint(r); f.keptMissing&bit != 0 && errs[r] == nil && f.a.current[r].Load() == sent[r] {
			if f.a.Engine.State().Members[r].State == engine.MemberActive {
				f.keptMissing &^= bit
				f.bm.SetMissing(r, false)
			}
		}
	}
	events := bt.Events // bt is the bitmap's again after Committed
	// The batch's clears do not count for a member that failed it (or
	// that it skipped): the regions are dirty again, and the superblock
	// generation that records the failure waits for the next batch,
	// which writes them and the header again.
	unclear = unclear && f.bm.Unclear(bt)
	if kept {
		f.released, f.failed = f.bm.Failed(bt, f.released[:0], f.failed[:0])
		f.a.route(f.failed, true)
	} else {
		f.released = f.bm.Committed(bt, f.released[:0])
	}
	f.a.route(f.released, false)
	if kept {
		// Superblock generations do not wait for a header the batch (or
		// a full rewrite it held back) failed to write: copies whose
		// header is older than the superblocks are not trusted at
		// assembly, the cautious side (waiting could wait forever on a
		// member that keeps failing).
		events = f.bm.Events()
	}
	if unclear {
		events = 0
	}
	f.clearsAgain = kept && clears
	if events != 0 {
		w := f.waiters[:0]
		for _, r := range f.waiters {
			if r.got <= events {
				r.reply <- r
			} else {
				w = append(w, r)
			}
		}
		f.waiters = w
	}
	return !kept
}

// copyBlocks copies bt's blocks into each role's scratch buffer (views[r]
// lists the copies), aligned as bt's for O_DIRECT. It
// maps a buffer only for a role without one (the first batch, or after a
// timeout): none on the write path otherwise.
func (f *flusher) copyBlocks(bt *bitmap.Batch, roles []int, n int) error {
	need := 0
	for _, b := range bt.Blocks {
		need += len(b.Data)
	}
	for len(f.scratch) < n {
		f.scratch = append(f.scratch, nil)
	}
	for len(f.views) < n {
		f.views = append(f.views, nil)
	}
	for _, r := range roles {
		if len(f.scratch[r]) < need {
			buf, _, err := alignedBuf(max(need, 64<<10))
			if err != nil {
				return err
			}
			mappedBuffers.Add(1)
			if old := f.scratch[r]; old != nil {
				// No write is out on it (see close).
				unix.Munmap(old)
				mappedBuffers.Add(-1)
			}
			f.scratch[r] = buf
		}
		v, off := f.views[r][:0], 0
		for _, b := range bt.Blocks {
			d := f.scratch[r][off : off+len(b.Data)]
			copy(d, b.Data)
			v = append(v, bitmap.Block{Index: b.Index, Offset: b.Offset, Data: d})
			off += len(b.Data)
		}
		f.views[r] = v
	}
	return nil
}

// memberSync flushes a member's volatile cache (a variable: tests watch
// the order of flushes and bitmap writes).
var memberSync = func(m *Member) error { return m.Flush() }

// writeBitmapBlock writes one bitmap block durably (a variable, as
// memberSync).
var writeBitmapBlock = func(m *Member, data []byte, off int64) error {
	return m.WriteAtDurable(data, off)
}

// clearIdle clears every idle region (a clean stop). The first ClearIdle
// of a generation may only write the header saying its events cleared
// (the clears wait for it to be durable): then once that has committed a
// second one clears.
func (f *flusher) clearIdle() {
	for range 2 {
		bt := f.bm.ClearIdle(f.now())
		blocked := f.bm.ClearBlocked()
		for bt != nil {
			// A clean stop: rare, so every batch flushes first.
			if !f.commit(bt, true) {
				return // regions left dirty: the cautious side
			}
			bt = f.bm.Prepare()
		}
		if !blocked {
			return
		}
	}
}

// generation makes a new superblock generation >= min durable in the
// bitmap header (clearing idle regions first if clear) and returns it;
// same: the header's own generation if that is min (taken by no
// superblock: see Array.unusedGen).
// Not on the flusher goroutine.
func (f *flusher) generation(min uint64, clear, same bool) (uint64, error) {
	r := flushReq{min: min, clear: clear, same: same, reply: make(chan flushReq, 1)}
	select {
	case f.reqs <- r:
	case <-f.done:
		return 0, errors.New("bitmap flusher stopped")
	}
	r = <-r.reply
	return r.got, r.err
}

func (f *flusher) close() {
	close(f.stop)
	<-f.done
	// No write is out on these: one given up keeps its buffer, which was
	// taken out of scratch then.
	for r, b := range f.scratch {
		if b != nil {
			unix.Munmap(b)
			mappedBuffers.Add(-1)
			f.scratch[r] = nil
		}
	}
}

// errMemberTimeout is the error of a member write that did not complete
// within the member timeout.
var errMemberTimeout = errors.New("member I/O timed out")

// writeAll runs write for each of roles in parallel and returns each
// role's error (indexed by role, len(members) long). With a timeout, a
// role whose write has not returned by then gets errMemberTimeout and is
// left behind (its goroutine ends whenever the member answers): a hung
// member must not hang the metadata writes of the whole array. Until it
// answers, it counts as late I/O on members[r]'s device (no rebuild
// writes the device: the late write would land on rebuilt data).
func writeAll(members []*Member, roles []int, timeout time.Duration, write func(r int) error) []error {
	type result struct {
		r   int
		err error
	}
	n := len(members)
	ch := make(chan result, len(roles)) // buffered: late writers never block
	var lmu sync.Mutex
	finished := make([]bool, n)
	given := make([]lateKey, n)
	for _, r := range roles {
		go func() {
			err := write(r)
			lmu.Lock()
			finished[r] = true
			lateEnd(given[r])
			lmu.Unlock()
			ch <- result{r, err}
		}()
	}
	errs := make([]error, n)
	pending := make(map[int]bool, len(roles))
	for _, r := range roles {
		pending[r] = true
	}
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	for len(pending) > 0 {
		select {
		case res := <-ch:
			errs[res.r] = res.err
			delete(pending, res.r)
		case <-deadline:
			lmu.Lock()
			for r := range pending {
				errs[r] = errMemberTimeout
				if !finished[r] {
					given[r] = lateBegin(members[r])
				}
			}
			lmu.Unlock()
			return errs
		}
	}
	return errs
}

func writable(m engine.MemberStatus) bool {
	return m.State == engine.MemberActive || m.State == engine.MemberRebuilding
}

// bitmapConfig is the bitmap configuration of an array whose superblock
// is sb.
func bitmapConfig(sb *engine.Superblock, arraySectors uint64) bitmap.Config {
	return bitmap.Config{ArrayUUID: sb.ArrayUUID, ArraySectors: arraySectors,
		AreaOffset: sb.BitmapOffset, AreaBytes: sb.BitmapBytes, Events: sb.Events}
}

// bitmapArea sizes the bitmap of a new array: region size (given or the
// default for the largest array the members could make) and the reserved
// bytes for it at block size bs.
func bitmapArea(maxArraySectors, regionSectors uint64, bs int) (uint64, uint64, error) {
	if regionSectors == 0 {
		regionSectors = bitmap.DefaultRegionSectors(maxArraySectors)
	}
	area, err := bitmap.AreaBytesFor(bitmap.Config{ArraySectors: maxArraySectors, RegionSectors: regionSectors, BlockSize: bs})
	if err != nil {
		return 0, 0, fmt.Errorf("bitmap region size %d bytes: %w", regionSectors<<9, err)
	}
	return regionSectors, area, nil
}
