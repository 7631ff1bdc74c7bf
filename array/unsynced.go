package array

import (
	"math"
	"sync"
	"sync/atomic"
)

// unsyncedMarks are the ranges a write left different between the copies
// (engine.Executor.Unsynced: it failed on a member kept as the last copy
// of other data, and reached the other copies) since the running resync
// started: the resync may have passed them already, so its progress and
// its end must not call them synced.
type unsyncedMarks struct {
	mu sync.Mutex
	// regions: bitmap regions marked (arrays with a bitmap).
	regions map[int]bool
	// from: the lowest array sector marked (arrays without a bitmap;
	// math.MaxUint64: none).
	from uint64
	// kick: a goroutine is on its way to start the resync.
	kick atomic.Bool
	// kicking: kickResync goroutines not yet returned (WaitSync waits for
	// them, so that the resync they start is waited for too).
	kicking atomic.Int32
}

// markUnsynced is engine.Executor.Unsynced (queue threads): reads of the
// range go to the chosen copy from now on (the bitmap's NeedsSync, or the
// full resync position of an array without one), and a resync makes the
// copies equal. It takes only marks.mu, never held across I/O.
func (a *Array) markUnsynced(sector uint64, sectors uint32) {
	if a.sync == nil || sectors == 0 {
		return
	}
	u := &a.sync.marks
	u.mu.Lock()
	if bm := a.Bitmap; bm != nil {
		first, last := bm.Regions(sector, uint64(sectors))
		// (Durable-dirty: the write started in the bitmap and has not
		// ended, so a crash before the resync resyncs the regions too.)
		bm.MarkNeedsSync(first, last)
		if u.regions == nil {
			u.regions = map[int]bool{}
		}
		for r := first; r <= last; r++ {
			u.regions[r] = true
		}
	} else {
		u.from = min(u.from, sector)
		if sector < a.sync.from.Load() {
			a.sync.from.Store(sector)
		}
	}
	u.mu.Unlock()
	if u.kick.CompareAndSwap(false, true) {
		u.kicking.Add(1)
		go a.kickResync()
	}
}

// markFill is the bitmap's Options.FirstWrite (its flusher, the bitmap's
// mutex held): region r, never written, is being made dirty for its first
// write. The rest of the region holds what the members held, which may
// differ between the copies; a resync makes them equal (md syncs a new
// array, and the space a grow adds, instead), so that a clean region's
// copies are equal throughout and check finds no difference. Reads are not
// redirected meanwhile: the written data is equal on every copy. For a
// parity array the same: the write makes only the stripes it writes
// consistent, the region's other stripes keep whatever parity the members
// held (parityUntrusted until the resync recomputes it).
func (a *Array) markFill(r int) {
	if a.sync == nil {
		return
	}
	u := &a.sync.marks
	u.mu.Lock()
	a.Bitmap.MarkFill(r, r)
	if u.regions == nil {
		u.regions = map[int]bool{}
	}
	u.regions[r] = true
	u.mu.Unlock()
	if u.kick.CompareAndSwap(false, true) {
		u.kicking.Add(1)
		go a.kickResync()
	}
}

// kickResync starts the resync that marked ranges need, unless a job
// runs (its end starts it: nextJob).
func (a *Array) kickResync() {
	defer a.sync.marks.kicking.Add(-1)
	a.sync.marks.kick.Store(false)
	// Not between a management command's checks and the rebuild it
	// starts (addMember holds spareMu throughout).
	a.spareMu.Lock()
	defer a.spareMu.Unlock()
	if a.Bitmap == nil {
		a.mu.Lock()
		u := &a.sync.marks
		u.mu.Lock()
		if u.from != math.MaxUint64 {
			if !a.sync.fullPending || u.from < a.sync.fullPos {
				a.sync.fullPos = u.from
			}
			a.sync.fullPending = true
		}
		u.mu.Unlock()
		a.mu.Unlock()
	}
	if !a.sync.busy() {
		a.startResync()
	}
}

// resyncStarting hands the marks made so far to the resync that starts
// (it reads NeedsSync, or starts at the returned position): only later
// marks are kept from its progress. start is where a full resync of an
// array without a bitmap would start; the result is where it starts.
func (a *Array) resyncStarting(start uint64) uint64 {
	u := &a.sync.marks
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.regions)
	start = min(start, u.from)
	u.from = math.MaxUint64
	return start
}

// resyncDone marks bitmap regions first..last resynced, but those marked
// since the resync started.
func (a *Array) resyncDone(first, last int) {
	u := &a.sync.marks
	u.mu.Lock()
	defer u.mu.Unlock()
	for r := first; r <= last; {
		if u.regions[r] {
			r++
			continue
		}
		end := r
		for end < last && !u.regions[end+1] {
			end++
		}
		a.Bitmap.ResyncDone(r, end)
		r = end + 1
	}
}

// fullResyncReached raises the position from which the copies of an
// array without a bitmap may differ to reached, the full resync's, but
// not past a range marked since it started.
func (a *Array) fullResyncReached(reached uint64) {
	u := &a.sync.marks
	u.mu.Lock()
	defer u.mu.Unlock()
	if reached = min(reached, u.from); reached > a.sync.from.Load() {
		a.sync.from.Store(reached)
	}
}

// fullResyncFinished records the end of an array's full resync (a.mu
// held): done, unless a range was marked since it started, from which it
// is pending again.
func (a *Array) fullResyncFinished() {
	u := &a.sync.marks
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.from != math.MaxUint64 {
		a.sync.fullPending, a.sync.fullPos = true, u.from
		a.sync.from.Store(u.from)
		return
	}
	a.sync.fullPending, a.sync.fullPos = false, 0
	a.sync.from.Store(math.MaxUint64)
}

// resyncFrom reports whether an array without a bitmap needs a full
// resync (a.mu held), and where a stopped one resumes: the recorded
// position, or a range marked since, if lower.
func (a *Array) resyncFrom() (bool, uint64) {
	u := &a.sync.marks
	u.mu.Lock()
	defer u.mu.Unlock()
	if !a.sync.fullPending {
		return u.from != math.MaxUint64, u.from
	}
	return true, min(a.sync.fullPos, u.from)
}

// marked reports whether a range of an array without a bitmap was marked
// unsynced and no resync has started from it yet.
func (a *Array) marked() bool {
	u := &a.sync.marks
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.from != math.MaxUint64
}
