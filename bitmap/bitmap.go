package bitmap

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Waiter is an opaque token the caller gives StartWrite for a write that
// has to wait (for example queue<<32 | tag); Committed hands it back when
// the write may proceed.
type Waiter uint64

// Defaults of Options.
const (
	DefaultClearDelay    = 5 * time.Second
	DefaultMaxClearDelay = 5 * time.Minute
)

// Options are the run-time policy of a Bitmap.
type Options struct {
	// ClearDelay is how long a region must have had no write before it is
	// cleared (0: DefaultClearDelay).
	ClearDelay time.Duration
	// MaxClearDelay caps the hysteresis back-off of the clear delay (0:
	// DefaultMaxClearDelay, or ClearDelay if that is larger): no region
	// stays dirty longer than this after its last write, and a region
	// revisited at intervals up to this stops being cleared (see Tick).
	// Setting it to ClearDelay disables the back-off.
	MaxClearDelay time.Duration
	// Notify, if set, is called (on a queue thread, from StartWrite) when
	// a write has to wait and no set request was pending: the flusher
	// should call Prepare. It must not block (for example a non-blocking
	// send on a channel of capacity 1, or an eventfd write).
	Notify func()
	// FirstWrite, if set, is called on the flusher thread (from Prepare,
	// with the Bitmap's mutex held) when never-written region r is made
	// dirty for its first write. The rest of the region holds whatever
	// the members held, which may differ between copies: the caller
	// should MarkFill it (and have a resync make the copies equal), so
	// that once the region is clean its copies are equal throughout. It
	// must not block nor call Bitmap methods other than MarkFill.
	FirstWrite func(r int)
}

// neverCleared is the cleanedAt of a region this Bitmap has not cleared:
// long enough ago that making it dirty is no reason to back off.
const neverCleared = -1 << 62

// maxDelay bounds the clear delays (about 2 years), so the hysteresis
// arithmetic cannot overflow.
const maxDelay = 1 << 56

// Per-region word layout (one atomic.Uint64 per region):
//
//	bits  0..31  writes in flight (started and not ended, waiting included)
//	bit      32  durable-dirty: every present member's copy says dirty, and
//	             no batch in flight will change that; writes proceed at once
//	bit      33  never written (mirror of the image, for Written)
//	bit      34  needs sync (loaded dirty, or AllDirty; until ResyncDone)
//	bit      35  fill: first written since it was never written; the
//	             unwritten rest may differ between copies (until
//	             ResyncDone)
//	bit      36  dirty in the image (mirror, for Dirty: set with the image
//	             and cleared only by the clear, so a region loaded dirty,
//	             or whose batch failed, is Dirty before it is durable-dirty)
//	bits 40..63  write completions, modulo 2^24 (the flusher's activity
//	             detector: EndWrite's single atomic add bumps it)
const (
	flagDurable  = 1 << 32
	flagNever    = 1 << 33
	flagNeedSync = 1 << 34
	flagFill     = 1 << 35
	flagDirty    = 1 << 36
	// flagsSync: the region must be resynced before it is cleared.
	flagsSync    = flagNeedSync | flagFill
	endShift     = 40
	endUnit      = 1 << endShift
	inflightMask = 1<<32 - 1
)

// Bitmap is the write-intent bitmap's in-memory core: per-region write
// counters and states, the group-commit and lazy-clear logic, and the image
// of the on-disk copy. It does no I/O and reads no clock: see the package
// documentation for which methods are called from which threads.
type Bitmap struct {
	geo   Geometry
	opts  Options
	shift uint // log2 of the region size in sectors
	words []atomic.Uint64
	// missing is the set of members that are missing (bit per member).
	missing atomic.Uint64

	mu        sync.Mutex
	requested []bool   // guarded by mu: in pending or in a batch's sets
	pending   []int32  // guarded by mu: regions to make durable-dirty
	waiters   []waiter // guarded by mu
	spare     []int32  // guarded by mu

	// Flusher state.
	image      []byte          // the copy's states after every prepared batch
	lastEnd    []uint32        // completion counter seen at the last tick
	lastActive []time.Duration // last tick that saw activity
	cleanedAt  []time.Duration // when the region was last cleared
	clearedNow []int32         // regions cleared since the last Prepare
	level      []uint8         // hysteresis back-off level
	maxLevel   uint8
	changed    []bool // per block: the image differs from what was prepared
	busy       []bool // per block: in a batch in flight
	// Per block: the RewriteAll generation wanted and committed.
	rewriteWant, rewriteDone []uint64
	rewriteGen               uint64
	buf                      []byte   // every block's buffer, contiguous
	bufs                     [][]byte // per block, slices of buf
	events                   uint64   // header events
	seq                      uint64   // sequence number of the last batch
	now                      time.Duration
	ticked                   bool
	free                     []*Batch

	dirty     atomic.Int64
	never     atomic.Int64
	stats     counters
	waitTimes Histogram

	// eventsCleared is the header's events cleared (as last set): the
	// generation of the last clear, or of one about to be made.
	eventsCleared atomic.Uint64
	// durableCleared is the events cleared of the last committed header:
	// regions are cleared only while it is at least events. Flusher.
	durableCleared uint64
}

type waiter struct {
	token       Waiter
	first, last int32
}

type counters struct {
	batches, blockWrites, waited, cleared, redirtied, durableEvents atomic.Uint64
}

// InitialState is the state of every region of a new bitmap.
type InitialState int

const (
	// InitNeverWritten: a new array; no initial sync is needed and resync
	// and rebuild skip regions until they are written.
	InitNeverWritten InitialState = iota
	// InitClean: every region clean (mdadm --assume-clean: the members are
	// known to be equal).
	InitClean
	// InitDirty: every region dirty and needing sync (a full initial sync,
	// or a bitmap that could not be trusted).
	InitDirty
)

// Create returns a new bitmap for cfg with every region in the initial
// state. Nothing is durable yet: the first batches (Prepare) write the
// whole copy to every member, the data blocks then the header, and no
// write proceeds before its regions' block has committed.
func Create(cfg Config, init InitialState, opts Options) (*Bitmap, error) {
	g, err := NewGeometry(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.ArrayUUID == [16]byte{} {
		return nil, fmt.Errorf("%w: array UUID is zero", ErrInvalidConfig)
	}
	if cfg.Events == 0 {
		return nil, fmt.Errorf("%w: events is 0", ErrInvalidConfig)
	}
	var s State
	switch init {
	case InitNeverWritten:
		s = NeverWritten
	case InitClean:
		s = Clean
	case InitDirty:
		s = Dirty
	default:
		return nil, fmt.Errorf("%w: unknown initial state %d", ErrInvalidConfig, init)
	}
	image := make([]byte, g.Regions)
	for i := range image {
		image[i] = byte(s)
	}
	return newBitmap(g, image, cfg.Events, cfg.Events, 0, opts)
}

// AllDirty returns a new bitmap for cfg with every region dirty and
// needing sync: what to assemble with when Load fails (the on-disk bitmap
// cannot be trusted; Assemble does this). Its first batches rewrite the
// whole copy. cfg's RegionSectors may be 0 (the default; the old region
// size is unknown when the header is lost); cfg.Events must be at least
// LoadInfo.Events.
func AllDirty(cfg Config, opts Options) (*Bitmap, error) {
	return Create(cfg, InitDirty, opts)
}

// newBitmap makes the core for image; every block is to be written by the
// first batch and no region is durable-dirty until then.
func newBitmap(g Geometry, image []byte, events, eventsCleared, seq uint64, opts Options) (*Bitmap, error) {
	if opts.ClearDelay < 0 || opts.MaxClearDelay < 0 {
		return nil, fmt.Errorf("%w: negative clear delay", ErrInvalidConfig)
	}
	if opts.ClearDelay == 0 {
		opts.ClearDelay = DefaultClearDelay
	}
	if opts.MaxClearDelay == 0 {
		opts.MaxClearDelay = max(DefaultMaxClearDelay, opts.ClearDelay)
	}
	if opts.MaxClearDelay > maxDelay {
		return nil, fmt.Errorf("%w: clear delay %v is longer than %v", ErrInvalidConfig, opts.MaxClearDelay, time.Duration(maxDelay))
	}
	if opts.MaxClearDelay < opts.ClearDelay {
		return nil, fmt.Errorf("%w: maximum clear delay %v is shorter than the clear delay %v", ErrInvalidConfig, opts.MaxClearDelay, opts.ClearDelay)
	}
	n := g.Regions
	b := &Bitmap{
		geo:         g,
		opts:        opts,
		words:       make([]atomic.Uint64, n),
		requested:   make([]bool, n),
		image:       image,
		lastEnd:     make([]uint32, n),
		lastActive:  make([]time.Duration, n),
		cleanedAt:   make([]time.Duration, n),
		level:       make([]uint8, n),
		changed:     make([]bool, g.Blocks()),
		busy:        make([]bool, g.Blocks()),
		rewriteWant: make([]uint64, g.Blocks()),
		rewriteDone: make([]uint64, g.Blocks()),
		bufs:        make([][]byte, g.Blocks()),
		events:      events,
		seq:         seq,
		shift:       uint(bits.TrailingZeros64(g.RegionSectors)),
	}
	for d := opts.ClearDelay; d < opts.MaxClearDelay && b.maxLevel < 62; d <<= 1 {
		b.maxLevel++
	}
	buf := alignedBuffer(g.Blocks()*g.BlockSize, min(g.BlockSize, 4096))
	b.buf = buf
	for i := range b.bufs {
		b.bufs[i] = buf[i*g.BlockSize : (i+1)*g.BlockSize : (i+1)*g.BlockSize]
	}
	for r := range b.cleanedAt {
		b.cleanedAt[r] = neverCleared
	}
	var dirty, never int64
	for r, s := range image {
		switch State(s) {
		case Dirty:
			b.words[r].Store(flagNeedSync | flagDirty)
			b.requested[r] = true // the first batch makes it durable
			dirty++
		case NeverWritten:
			b.words[r].Store(flagNever)
			never++
		}
	}
	b.dirty.Store(dirty)
	b.never.Store(never)
	b.eventsCleared.Store(min(max(eventsCleared, 1), events))
	b.RewriteAll()
	return b, nil
}

// alignedBuffer returns n zero bytes whose address is a multiple of align
// (a power of two), for O_DIRECT.
func alignedBuffer(n, align int) []byte {
	buf := make([]byte, n+align)
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & uintptr(align-1))
	if off != 0 {
		off = align - off
	}
	return buf[off : off+n : off+n]
}

// Buffer returns the memory every Batch's block Data is a slice of (block
// i at i*BlockSize), aligned to min(BlockSize, 4096): register it once as
// an io_uring fixed buffer. Any thread.
func (b *Bitmap) Buffer() []byte { return b.buf }

// Geometry returns the bitmap's layout.
func (b *Bitmap) Geometry() Geometry { return b.geo }

// Regions returns the regions covered by count sectors from sector
// (count >= 1), for StartWrite and EndWrite. Any thread.
func (b *Bitmap) Regions(sector, count uint64) (first, last int) {
	return int(sector >> b.shift), int((sector + count - 1) >> b.shift)
}

// StartWrite is called by a queue thread before it writes regions first
// to last (inclusive) of any member. It never blocks. When it returns true
// the write may go to the members at once: every region is durable-dirty
// (two atomic operations for the usual one-region write, no lock). When it
// returns false some region is clean or never written: the write is
// registered under token w and must be held until Committed returns w. In
// both cases the regions count the write as in flight until EndWrite, so
// they are not cleared meanwhile.
func (b *Bitmap) StartWrite(first, last int, w Waiter) (ready bool) {
	b.checkRange(first, last)
	ready = true
	for r := first; r <= last; r++ {
		if b.words[r].Add(1)&flagDurable == 0 {
			ready = false
		}
	}
	if ready {
		return true
	}
	return b.startSlow(first, last, w)
}

// startSlow registers a write that found a region not durable-dirty.
func (b *Bitmap) startSlow(first, last int, w Waiter) bool {
	notify := false
	b.mu.Lock()
	// Committed may have made the regions durable since the add.
	if b.allDurable(first, last) {
		b.mu.Unlock()
		return true
	}
	b.waiters = append(b.waiters, waiter{token: w, first: int32(first), last: int32(last)})
	for r := first; r <= last; r++ {
		if b.words[r].Load()&flagDurable == 0 && !b.requested[r] {
			b.requested[r] = true
			notify = notify || len(b.pending) == 0
			b.pending = append(b.pending, int32(r))
		}
	}
	b.mu.Unlock()
	b.stats.waited.Add(1)
	if notify && b.opts.Notify != nil {
		b.opts.Notify()
	}
	return false
}

func (b *Bitmap) allDurable(first, last int) bool {
	for r := first; r <= last; r++ {
		if b.words[r].Load()&flagDurable == 0 {
			return false
		}
	}
	return true
}

// EndWrite is called by a queue thread when a write StartWrite registered
// (ready at once or released later) has completed on every member it went
// to, and after SetMissing for any member it failed on. One atomic add per
// region; no lock, no clock.
func (b *Bitmap) EndWrite(first, last int) {
	b.checkRange(first, last)
	for r := first; r <= last; r++ {
		if b.words[r].Add(endUnit-1)&inflightMask == inflightMask {
			endWithoutStart(r)
		}
	}
}

func endWithoutStart(r int) {
	panic(fmt.Sprintf("bitmap: EndWrite on region %d without a StartWrite", r))
}

func (b *Bitmap) checkRange(first, last int) {
	if first < 0 || first > last || last >= len(b.words) {
		badRange(first, last, len(b.words))
	}
}

func badRange(first, last, n int) {
	panic(fmt.Sprintf("bitmap: regions %d..%d out of range (0..%d)", first, last, n-1))
}

// Written reports whether region r has ever been written (is not
// NeverWritten): rebuild and resync skip regions that were not. Any
// thread.
func (b *Bitmap) Written(r int) bool { return b.words[r].Load()&flagNever == 0 }

// Dirty reports whether region r is dirty now: dirty in the image (not
// cleared since it was loaded dirty or a write made it dirty, whether or
// not a batch made that durable yet), durable-dirty (a write to it may
// have been issued since it was last clean) or needing sync. A
// region is never cleared while a member is missing, so for a member that
// went missing the regions Dirty when it returns cover every write it
// missed, including writes issued until it became writable again (unlike
// a DirtyRegions snapshot taken before). Any thread.
func (b *Bitmap) Dirty(r int) bool {
	return b.words[r].Load()&(flagDurable|flagDirty|flagsSync) != 0
}

// NeedsSync reports whether region r must be resynced before it may be
// cleared: it was dirty when the bitmap was loaded (or is
// AllDirty/InitDirty, or MarkNeedsSync), or it was first written since
// it was never written (MarkFill), and ResyncDone has not been called for
// it. Any thread.
func (b *Bitmap) NeedsSync(r int) bool { return b.words[r].Load()&flagsSync != 0 }

// CopiesDiffer reports whether the copies of region r's written data may
// differ (NeedsSync but for MarkFill alone): reads must go to the one
// copy resync copies from, so that answers are stable. A region only
// MarkFill'ed differs in data never written, which reads need not keep
// stable. Any thread.
func (b *Bitmap) CopiesDiffer(r int) bool { return b.words[r].Load()&flagNeedSync != 0 }

// ResyncDone records that regions first..last have been resynced (their
// copies are equal): they may now be cleared once idle. Any thread.
func (b *Bitmap) ResyncDone(first, last int) {
	b.checkRange(first, last)
	for r := first; r <= last; r++ {
		if b.words[r].Load()&flagsSync != 0 { // (no store to a word queues update)
			b.words[r].And(^uint64(flagsSync))
		}
	}
}

// MarkFill records that the never-written rest of regions first..last,
// first written now, may differ between the copies until ResyncDone: the
// regions are not cleared until a resync made the copies equal (reads
// are not redirected: see CopiesDiffer). Any thread.
func (b *Bitmap) MarkFill(first, last int) {
	b.checkRange(first, last)
	for r := first; r <= last; r++ {
		b.words[r].Or(flagFill)
	}
}

// MarkNeedsSync records that the copies of regions first..last may differ
// (a write reached some copies only) until ResyncDone: reads go to the
// chosen copy and the regions are not cleared. Each region must be
// durable-dirty (a write to it started and has not ended), so that a crash
// resyncs it too. Any thread.
func (b *Bitmap) MarkNeedsSync(first, last int) {
	b.checkRange(first, last)
	for r := first; r <= last; r++ {
		b.words[r].Or(flagNeedSync)
	}
}

// SetMissing records that member (0..63) is missing or failed (missing
// true) or back in sync (false). While any member is missing no region is
// cleared, so the regions it missed stay dirty and a re-add recovers
// exactly the dirty regions (DirtyRegions). Any thread; call it before
// EndWrite of a write that failed on the member, and, after a re-add,
// only once the member has been recovered. See the package documentation
// for the superblock ordering.
func (b *Bitmap) SetMissing(member int, missing bool) {
	if member < 0 || member > 63 {
		panic(fmt.Sprintf("bitmap: member %d out of range 0..63", member))
	}
	if missing {
		b.missing.Or(1 << member)
	} else {
		b.missing.And(^(uint64(1) << member))
	}
}

// Missing returns the members SetMissing marks missing, as a bit mask.
// Any thread.
func (b *Bitmap) Missing() uint64 { return b.missing.Load() }

// Stats are the bitmap's counters, for metrics.
type Stats struct {
	Regions int
	// DirtyRegions and NeverWrittenRegions count regions by in-memory
	// state.
	DirtyRegions, NeverWrittenRegions int64
	// Batches and BlockWrites count prepared batches and their blocks
	// (each block is written to every present member).
	Batches, BlockWrites uint64
	// WaitedWrites counts the writes StartWrite made wait.
	WaitedWrites uint64
	// Cleared counts regions cleared; Redirtied counts regions made dirty
	// again within the hysteresis window after being cleared (each raised
	// the region's clear delay).
	Cleared, Redirtied uint64
	// DurableEvents is the events value of the last committed header.
	DurableEvents uint64
}

// Stats returns the counters. Any thread.
func (b *Bitmap) Stats() Stats {
	return Stats{
		Regions:             b.geo.Regions,
		DirtyRegions:        b.dirty.Load(),
		NeverWrittenRegions: b.never.Load(),
		Batches:             b.stats.batches.Load(),
		BlockWrites:         b.stats.blockWrites.Load(),
		WaitedWrites:        b.stats.waited.Load(),
		Cleared:             b.stats.cleared.Load(),
		Redirtied:           b.stats.redirtied.Load(),
		DurableEvents:       b.stats.durableEvents.Load(),
	}
}

// WaitTimes is the histogram the caller records waited writes' wait time
// in (from StartWrite returning false to the release). Any thread.
func (b *Bitmap) WaitTimes() *Histogram { return &b.waitTimes }

// HistogramBuckets is the number of buckets of a Histogram.
const HistogramBuckets = 22

// Histogram is a fixed-bucket, allocation-free, concurrency-safe
// histogram of durations: bucket i < HistogramBuckets-1 counts durations
// up to 1µs<<i (1µs, 2µs, 4µs, ... 1.05s), the last one the rest.
type Histogram struct {
	counts [HistogramBuckets]atomic.Uint64
	sum    atomic.Int64
}

// Observe records d.
func (h *Histogram) Observe(d time.Duration) {
	h.counts[bucket(d)].Add(1)
	h.sum.Add(int64(d))
}

func bucket(d time.Duration) int {
	for i := 0; i < HistogramBuckets-1; i++ {
		if d <= time.Microsecond<<i {
			return i
		}
	}
	return HistogramBuckets - 1
}

// HistogramSnapshot is a copy of a Histogram's counts.
type HistogramSnapshot struct {
	Counts [HistogramBuckets]uint64
	Sum    time.Duration
}

// Snapshot copies the counts (not atomically as a whole).
func (h *Histogram) Snapshot() HistogramSnapshot {
	var s HistogramSnapshot
	for i := range s.Counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}

// BucketBound is the upper bound of bucket i (math.MaxInt64 for the last).
func BucketBound(i int) time.Duration {
	if i >= HistogramBuckets-1 {
		return math.MaxInt64
	}
	return time.Microsecond << i
}
