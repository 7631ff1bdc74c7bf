package resync_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// TestStackModel is a model-based test of the RAID core as the array wires
// it: engine.Executor (several requests in flight, member operations
// completing in an order rapid draws), engine.Barrier, the write-intent
// bitmap.Bitmap with its on-disk copies in the members and its flush
// cycle, and resync.Syncer jobs (resync after a crash, rebuild of a
// replaced member) interleaved with user I/O, on in-memory or file-backed
// members behind a fault-injecting wrapper, for every level and layout.
//
// Events: reads, writes (FUA or not), write-zeroes and flushes; delivery
// of member operations; bitmap batches prepared, written member by member
// and committed (which is when a persisted member state becomes durable,
// as in the array: header first, then superblocks); member failures, bad
// sectors, hangs (the executor's clock passes MemberTimeout and Tick
// abandons the operations; abandoned reads need a spare buffer; late
// results come back as Stale), crashes (member writes in flight land,
// vanish or land as a prefix of whole sectors; bitmap block writes too),
// restarts from the last durable superblock state and bitmap copies, and
// replacement of a failed member by a fresh one full of garbage, rebuilt
// while user writes go on.
//
// The reference is a flat image of candidate values per sector: the last
// acknowledged write, plus the data of writes that failed or were in
// flight at a crash. Every read returns, for every sector, one of its
// candidates (or, while a write overlaps it, that write's data), and once
// a read has seen a candidate, later reads see the same one until a fault
// could legitimately change which copy answers (reads in flight together
// agree too); a read fails (ErrNoCopy) only if some sector had, at some
// point during the read, no copy left that could serve it, and succeeds
// only if every sector had one at some point. After every resync and at the end, all readable
// copies of every written sector are equal; at the end every sector is
// read back.
//
// Everything runs on the test's goroutine except the sync job, which runs
// on its own as the array runs it but as a coroutine (model_sync_test.go):
// it stops at every call into the model, so its interleaving with user
// I/O is drawn by rapid too and every run is deterministic and shrinks.
// The real array now runs in array.TestArrayModel (array/model_test.go,
// go test ./array -run TestArrayModel): the array's own queue handlers, flusher,
// superblock generations, spares, re-add and replace, on in-memory members
// with volatile caches, torn writes and kill -9. The stand-ins below for the
// array's part stay: this model drives the core deterministically (every
// interleaving with the sync job drawn), which the array model does not.
// The model plays the array's part (array/): member failures persisted
// through the bitmap header then the superblocks, bitmap batches written
// to every present member, the rebuild and resync callbacks, member
// replacement.
//
// Not modelled: more than one queue (one Executor), read repair (the
// executor only reports the ranges, Executor.ReadRepair; the array
// rewrites them with the range raised: array/repair.go), volatile member caches (a
// member write that completed is durable, so flush and FUA change
// nothing), torn superblocks (the superblock record is written
// atomically), discard, check and repair jobs, re-adding a member that
// comes back (only replacement by a new device), a persist that fails
// (PersistFailed), spare activation. A hung member answers the sync job's
// synchronous I/O with ETIMEDOUT (array's memberIO has no timeout of its
// own).
func TestStackModel(t *testing.T) {
	for _, g := range modelGeometries {
		t.Run(fmt.Sprintf("%s%s_x%d", g.Level, g.Layout, g.Members), func(t *testing.T) {
			dir := t.TempDir()
			var cov coverage
			rapid.Check(t, func(rt *rapid.T) {
				m := newModel(rt, g, dir)
				m.cov = &cov
				m.count(fmt.Sprintf("files %v", m.files))
				defer m.close()
				m.run(rt)
				m.finish()
			})
			t.Logf("coverage over all runs: %s", cov.String())
		})
	}
}

// coverage counts what the runs got to, to see that the model reaches
// the interesting states (go test -v).
type coverage struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *coverage) add(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[what]++
}

func (c *coverage) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := slices.Sorted(maps.Keys(c.n))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-40s %d", k, c.n[k])
	}
	return b.String()
}

const (
	modelDepth      = 4                // requests in flight (tags)
	modelMaxSectors = 32               // largest request
	modelTimeout    = 30 * time.Second // Executor.MemberTimeout
)

// modelGeometries are engine's (exec_test.go): every level and layout.
var modelGeometries = []engine.Geometry{
	{Level: engine.Level0, Members: 2, ChunkSectors: 8},
	{Level: engine.Level0, Members: 3, ChunkSectors: 16},
	{Level: engine.Level1, Members: 2, ChunkSectors: 8},
	{Level: engine.Level1, Members: 3, ChunkSectors: 8},
	{Level: engine.Level10, Members: 2, Layout: engine.LayoutN2, ChunkSectors: 8},
	{Level: engine.Level10, Members: 3, Layout: engine.LayoutN2, ChunkSectors: 8},
	{Level: engine.Level10, Members: 4, Layout: engine.LayoutN2, ChunkSectors: 16},
	{Level: engine.Level10, Members: 2, Layout: engine.LayoutF2, ChunkSectors: 8},
	{Level: engine.Level10, Members: 3, Layout: engine.LayoutF2, ChunkSectors: 8},
	{Level: engine.Level10, Members: 4, Layout: engine.LayoutO2, ChunkSectors: 8},
	{Level: engine.Level10, Members: 3, Layout: engine.LayoutN3, ChunkSectors: 8},
	{Level: engine.Level10, Members: 4, Layout: engine.LayoutF3, ChunkSectors: 8},
	{Level: engine.Level10, Members: 5, Layout: engine.LayoutO3, ChunkSectors: 16},
}

var modelUUID = [16]byte{0x6d, 0x6f, 0x64, 0x65, 0x6c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}

const eio = -int32(syscall.EIO)

// superblock is what the members' superblocks say, as one durable record
// (the model writes superblocks atomically).
type superblock struct {
	events  uint64
	members []engine.MemberStatus
	serials []int // the device holding each role (whose superblock says so)
}

// request is a user request in flight.
type request struct {
	tag    uint16
	op     engine.ReqOp
	sector uint64
	n      uint32
	id     uint64 // write: the id of its data (write-zeroes: 0)
	buf    []byte
	// Reads, per sector: the acceptable ids (the candidates, or the one
	// pinned, plus the data of writes overlapping the read in time), the
	// same without the pin (used if a fault came during the read),
	// whether anything goes (never written), whether a write overlapped
	// the read, whether it was pinned at the start.
	acc      [][]uint64
	accFull  [][]uint64
	any      []bool
	conc     []bool
	pinnedAt []bool
	epoch    int // the model's fault epoch when the read started
	// seen: per sector, the copies (bit i: Locate's i-th) seen unable to
	// serve the request at some point while it was in flight; seenM, for
	// a flush, the members.
	seen  []uint64
	seenM uint64
	// keptDead, for a flush: a member kept as a last copy was dead or timed
	// out at some point while it was in flight (keptDead): its flush may
	// fail the request, whatever the state when it completes.
	keptDead bool
	// alive: per sector (reads), some copy could serve it at some point.
	alive []bool
	// Abandoned reads: the tag holds a spare buffer; outstanding late
	// results; the old buffers (swaps of them: Rebuffer, Complete) wait
	// for them.
	spare       bool
	outstanding int
	swaps       int
	quarantined bool
	done        bool
	err         error
}

func (r *request) writes() bool { return r.op == engine.ReqWrite || r.op == engine.ReqWriteZeroes }

func (r *request) overlaps(sector uint64, n uint32) bool {
	return r.op != engine.ReqFlush && r.sector < sector+uint64(n) && sector < r.sector+uint64(r.n)
}

func (r *request) String() string {
	op := [...]string{"read", "write", "flush", "discard", "write-zeroes"}[r.op]
	if r.op == engine.ReqFlush {
		return fmt.Sprintf("tag %d flush", r.tag)
	}
	return fmt.Sprintf("tag %d %s %d+%d (id %d)", r.tag, op, r.sector, r.n, r.id)
}

// memOp is a member operation submitted and not yet completed. A device
// carries an operation out (the data moves) and then completes it: the
// model may do the two at different times.
type memOp struct {
	tag      uint16
	op       engine.OpID
	io       engine.MemberIO
	data     []byte
	dev      *device // the member's device when it was submitted
	r        *request
	executed bool  // carried out; res is its result, not delivered yet
	res      int32 // (executed)
}

// execute carries o out on its device, once.
func (o *memOp) execute() int32 {
	if !o.executed {
		o.res, o.executed = exec(o), true
	}
	return o.res
}

// flight is a bitmap batch being written: one write per present member
// and block.
type flight struct {
	bt     *bitmap.Batch
	writes []blockWrite
}

type blockWrite struct {
	role int
	dev  *device
	blk  bitmap.Block
}

// persistReq is a member state waiting to be made durable: its
// generation's bitmap header first, then the superblocks.
type persistReq struct {
	ev      uint64
	st      *engine.ArrayState
	serials []int
}

// model is the state that survives restarts: members, the reference, the
// durable superblock.
type model struct {
	t          *rapid.T
	g          engine.Geometry
	size       uint64 // array sectors
	unit       uint64 // I/O and bad-block unit (Executor.RetryUnit)
	redundant  bool
	files      bool
	dir        string
	init       bitmap.InitialState
	bcfg       bitmap.Config
	devBytes   int64
	flushEvery time.Duration
	barShift   uint
	spares0    int
	serial     int
	all        []*device

	devs []*device // per role

	// Reference, per array sector: candidate ids, a pinned one (what
	// reads have seen), undefined (never written: anything goes).
	full   [][]uint64
	pinned []bool
	pin    []uint64
	undef  []bool
	nextID uint64
	epoch  int // bumped whenever a fault may change which copy answers

	sb     superblock
	ckpt   []uint64 // rebuild checkpoints (durable positions)
	events uint64   // last superblock generation used

	now    atomic.Int64
	w      *world
	quiet  bool // final phase: no draws
	silent bool // reading back: no log
	last   []engine.MemberState
	steps  int
	cov    *coverage
}

func (m *model) count(what string) {
	if m.cov != nil && !m.silent {
		m.cov.add(what)
	}
}

// world is one incarnation of the stack, from assembly to crash.
type world struct {
	m     *model
	arr   *engine.Array
	ex    *engine.Executor
	bar   *engine.Barrier
	bm    *bitmap.Bitmap
	co    *coSync
	stuck map[resync.Kind]string // member states at which a job of that kind last failed
	// marked: bitmap regions marked unsynced (Executor.Unsynced) since the
	// running resync started; its progress and end leave them needing sync
	// (the array's unsyncedMarks).
	marked   map[int]bool
	reqs     [modelDepth]*request
	pending  []*memOp
	late     []*memOp // abandoned, result not delivered yet
	flights  []*flight
	persists []persistReq
	durable  uint64 // newest state generation persisted by this world
	spares   int
	wake     atomic.Bool
	exits    int // requests and member operations finished: barrier counts may have dropped
	// Stale must come exactly for late results.
	expectStale, sawStale bool
	// delivering: the operation whose result Done is being given
	delivering *memOp
}

func newModel(t *rapid.T, g engine.Geometry, dir string) *model {
	g.MemberSectors = uint64(rapid.IntRange(8, 40).Draw(t, "chunks")) * g.ChunkSectors
	m := &model{t: t, g: g, size: g.ArraySectors(), redundant: g.Level != engine.Level0, dir: dir}
	m.unit = rapid.SampledFrom([]uint64{1, 8}).Draw(t, "unit")
	m.files = rapid.Bool().Draw(t, "files")
	m.init = rapid.SampledFrom([]bitmap.InitialState{bitmap.InitClean, bitmap.InitNeverWritten}).Draw(t, "init")
	m.flushEvery = rapid.SampledFrom([]time.Duration{time.Nanosecond, time.Hour}).Draw(t, "flush interval")
	m.barShift = rapid.SampledFrom([]uint{3, 6, 12}).Draw(t, "barrier shift")
	m.spares0 = rapid.IntRange(0, 2).Draw(t, "spare buffers")
	m.nextID = 1
	dataBytes := g.MemberSectors << 9
	m.devBytes = int64(dataBytes)
	if m.redundant {
		m.bcfg = bitmap.Config{ArrayUUID: modelUUID, ArraySectors: m.size, RegionSectors: bitmap.MinRegionSectors,
			BlockSize: 4096, AreaOffset: (dataBytes + 4095) &^ 4095, Events: 1}
		area, err := bitmap.AreaBytesFor(m.bcfg)
		if err != nil {
			t.Fatal(err)
		}
		m.bcfg.AreaBytes = area
		m.devBytes = int64(m.bcfg.AreaOffset + area)
	}
	for range g.Members {
		m.devs = append(m.devs, m.newDevice(m.init == bitmap.InitNeverWritten))
	}
	m.full = make([][]uint64, m.size)
	m.pinned = make([]bool, m.size)
	m.pin = make([]uint64, m.size)
	m.undef = make([]bool, m.size)
	for s := range m.full {
		m.full[s] = []uint64{0}
		m.undef[s] = m.init == bitmap.InitNeverWritten
	}
	m.sb = superblock{events: 1, members: make([]engine.MemberStatus, g.Members), serials: m.serials()}
	m.ckpt = make([]uint64, g.Members)
	m.events = 1
	t.Logf("%s%s x%d, %d sectors per member, %d array sectors, unit %d, files %v, init %v, flush every %v, barrier shift %d, %d spare buffers",
		g.Level, g.Layout, g.Members, g.MemberSectors, m.size, m.unit, m.files, m.init, m.flushEvery, m.barShift, m.spares0)
	m.boot(true)
	if m.redundant {
		// The new array's bitmap is written before it serves.
		m.flushBitmap()
	}
	return m
}

// flushBitmap runs the bitmap's flusher until it has nothing to write:
// every batch in flight and every new one written to every member and
// committed. It reports whether it wrote anything.
func (m *model) flushBitmap() bool {
	w := m.w
	for i := range 100 {
		if len(w.flights) > 0 {
			m.deliverBlock(w.flights[0], 0)
			continue
		}
		bt := w.bm.Prepare()
		if bt == nil {
			return i > 0
		}
		m.launchBatch(bt)
	}
	m.fatalf("the bitmap flusher does not settle")
	return true
}

// progress lets the I/O in flight go on without faults: member
// operations complete in order and the bitmap is flushed, until nothing
// is left (sync jobs and hung members stay as they are).
func (m *model) progress() {
	w := m.w
	for range 10_000 {
		if idx := m.deliverable(); len(idx) > 0 {
			m.deliver(idx[0])
			continue
		}
		if w.bm != nil && m.flushBitmap() {
			m.settle()
			continue
		}
		if w.bm == nil && len(w.persists) > 0 {
			m.completePersist(0)
			continue
		}
		if w.wake.Load() {
			m.settle()
			continue
		}
		return
	}
	m.fatalf("progress does not settle")
}

func (m *model) serials() []int {
	s := make([]int, len(m.devs))
	for r, d := range m.devs {
		s[r] = d.serial
	}
	return s
}

func (m *model) newDevice(garbage bool) *device {
	m.serial++
	var s store
	if m.files {
		fs, err := newFileStore(m.dir, m.devBytes)
		if err != nil {
			m.t.Fatal(err)
		}
		s = fs
	} else {
		s = &memStore{b: make([]byte, m.devBytes)}
	}
	if garbage {
		fillGarbage(s, m.devBytes, uint64(m.serial))
	}
	d := &device{s: s, serial: m.serial, sectors: m.g.MemberSectors, bad: map[uint64]bool{}}
	m.all = append(m.all, d)
	return d
}

func (m *model) close() {
	if w := m.w; w != nil && w.co != nil {
		w.co.kill()
		w.co = nil
	}
	for _, d := range m.all {
		d.s.Close()
	}
}

func (m *model) logf(format string, args ...any) {
	if !m.silent {
		m.t.Logf(format, args...)
	}
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), m.dump())
}

// dump describes the stack for failure messages.
func (m *model) dump() string {
	var b strings.Builder
	w := m.w
	st := w.arr.State()
	fmt.Fprintf(&b, "state gen %d (durable %d):", st.Gen, w.durable)
	for r, ms := range st.Members {
		d := m.devs[r]
		fmt.Fprintf(&b, " [%d %v", r, ms.State)
		if ms.State == engine.MemberRebuilding {
			fmt.Fprintf(&b, "@%d", ms.RebuildOffset)
		}
		fmt.Fprintf(&b, " %v dead=%v hung=%v bad=%d]", d, d.dead, d.hung, len(d.bad))
	}
	fmt.Fprintf(&b, "\nsuperblock: events %d %v", m.sb.events, m.sb.members)
	if w.bm != nil {
		var ns []int
		for r := range w.bm.Geometry().Regions {
			if w.bm.NeedsSync(r) {
				ns = append(ns, r)
			}
		}
		fmt.Fprintf(&b, "\nbitmap: dirty %v, needs sync %v", w.bm.DirtyRegions(nil), ns)
	}
	return b.String()
}

// boot assembles a world from the durable superblock and bitmap copies
// (first: creates the bitmap).
func (m *model) boot(first bool) {
	w := &world{m: m, stuck: map[resync.Kind]string{}, spares: m.spares0}
	arr, err := engine.NewArray(m.g)
	if err != nil {
		m.t.Fatal(err)
	}
	// A role is assembled from the device whose superblock names it; a
	// device that cannot be read, or a new one whose superblock was never
	// written, leaves its role missing.
	members := slices.Clone(m.sb.members)
	for r, d := range m.devs {
		if d.serial != m.sb.serials[r] || d.dead {
			members[r] = engine.MemberStatus{State: engine.MemberMissing}
		}
	}
	arr.SetState(members)
	w.arr = arr
	for _, ms := range members {
		if !first {
			m.count("restart: member " + ms.State.String())
		}
	}
	if m.redundant {
		opts := bitmap.Options{ClearDelay: 2 * time.Second, MaxClearDelay: 8 * time.Second}
		var bm *bitmap.Bitmap
		if first {
			bm, err = bitmap.Create(m.bcfg, m.init, opts)
		} else {
			cfg := m.bcfg
			cfg.Events = m.sb.events
			copies := make([][]byte, m.g.Members)
			for r, ms := range members {
				if ms.State == engine.MemberActive {
					copies[r] = m.devs[r].readRaw(int(cfg.AreaBytes), cfg.AreaOffset)
				}
			}
			var info *bitmap.LoadInfo
			bm, info, err = bitmap.Assemble(cfg, copies, opts)
			if err == nil {
				m.logf("  assembled: bitmap %d dirty, all dirty %v (%v)", info.Dirty, info.AllDirty, info.Err)
				switch {
				case info.AllDirty:
					m.count("restart: bitmap unusable, all dirty")
				case info.Dirty > 0:
					m.count("restart: bitmap loaded with dirty regions")
				default:
					m.count("restart: bitmap loaded clean")
				}
			}
		}
		if err != nil {
			m.t.Fatal(err)
		}
		for r, ms := range members {
			if ms.State != engine.MemberActive {
				bm.SetMissing(r, true)
			}
		}
		w.bm = bm
		w.bar = engine.NewBarrier(m.barShift, func() { w.wake.Store(true) })
	}
	ex := engine.NewExecutor(arr, w, modelDepth, modelMaxSectors<<9)
	ex.RetryUnit = uint32(m.unit)
	ex.Now = func() time.Duration { return time.Duration(m.now.Load()) }
	ex.MemberTimeout = modelTimeout
	if w.bm != nil {
		ex.Intent = w.bm
		ex.Barrier = w.bar
		ex.Unsynced = func(sector uint64, sectors uint32) {
			first, last := w.bm.Regions(sector, uint64(sectors))
			w.bm.MarkNeedsSync(first, last)
			if w.marked == nil {
				w.marked = map[int]bool{}
			}
			for r := first; r <= last; r++ {
				w.marked[r] = true
			}
			m.logf("  unsynced: regions %d..%d (a write failed on a kept last copy)", first, last)
		}
	}
	w.ex = ex
	w.durable = arr.State().Gen
	m.w = w
	m.unpin()
	m.last = states(arr.State())
}

func states(st *engine.ArrayState) []engine.MemberState {
	s := make([]engine.MemberState, len(st.Members))
	for i, ms := range st.Members {
		s[i] = ms.State
	}
	return s
}

func readable(ms engine.MemberStatus, end uint64) bool {
	return ms.State == engine.MemberActive || (ms.State == engine.MemberRebuilding && end <= ms.RebuildOffset)
}

func writable(ms engine.MemberStatus) bool {
	return ms.State == engine.MemberActive || ms.State == engine.MemberRebuilding
}

// unpin forgets what reads have seen: a fault may make another copy
// answer.
func (m *model) unpin() {
	m.epoch++
	clear(m.pinned)
}

// acceptable is sector s's candidate set now.
func (m *model) acceptable(s uint64) []uint64 {
	if m.pinned[s] {
		return []uint64{m.pin[s]}
	}
	return slices.Clone(m.full[s])
}

// addCandidate records that sector s may also hold id.
func (m *model) addCandidate(s, id uint64) {
	if !slices.Contains(m.full[s], id) {
		m.full[s] = append(m.full[s], id)
	}
	m.pinned[s] = false
}

// stateSig identifies the member states and devices (not rebuild
// offsets): a job that failed is not retried until it changes.
func (m *model) stateSig() string {
	var b strings.Builder
	for r, ms := range m.w.arr.State().Members {
		fmt.Fprintf(&b, "%v/%d ", ms.State, m.devs[r].serial)
	}
	return b.String()
}

// ---- engine.Backend ----

func (w *world) Submit(tag uint16, op engine.OpID, io engine.MemberIO, data []byte) {
	m := w.m
	r := w.reqs[tag]
	if r == nil {
		m.fatalf("Submit for tag %d with no request", tag)
	}
	ms := w.arr.State().Members[io.Member]
	if io.Kind == engine.IORead && !readable(ms, io.Sector+uint64(io.Sectors)) {
		m.fatalf("%v: read of member %d sectors %d+%d, which is %v", r, io.Member, io.Sector, io.Sectors, ms)
	}
	if io.Kind != engine.IORead && !writable(ms) {
		m.fatalf("%v: %v to member %d, which is %v", r, io.Kind, io.Member, ms)
	}
	if io.Kind != engine.IOFlush && w.lateWriteOn(m.devs[io.Member]) {
		// As the array's queue: nothing is sent to a member with a
		// given-up write still out (array.Member.lateWrites).
		m.count("member op refused: a late write is out")
		w.ex.Done(tag, op, eio)
		return
	}
	w.pending = append(w.pending, &memOp{tag: tag, op: op, io: io, data: data, dev: m.devs[io.Member], r: r})
}

// lateWriteOn reports whether a write given up after the timeout is still
// out on d.
func (w *world) lateWriteOn(d *device) bool {
	for _, o := range w.late {
		if o.dev == d && o.io.Kind != engine.IORead && o.io.Kind != engine.IOFlush {
			return true
		}
	}
	return false
}

func (w *world) Complete(tag uint16, err error) {
	m := w.m
	r := w.reqs[tag]
	if r == nil || r.done {
		m.fatalf("tag %d completed twice or without a request", tag)
	}
	m.observeReq(r) // failures within this step (a timeout) count too
	r.done, r.err = true, err
	w.reqs[tag] = nil
	if r.spare {
		// The spare becomes the tag's buffer (the request's data is copied
		// into it: r.buf is checked now); the old one waits for the late
		// reads that may still land in it.
		r.spare = false
		r.swaps++
	}
	if r.swaps > 0 {
		if r.outstanding == 0 {
			w.spares += r.swaps
			r.swaps = 0
		} else {
			r.quarantined = true
		}
	}
	w.exits++
	m.completed(r, err)
}

func (w *world) Persist(*engine.ArrayState) { w.m.persist() }

// Departed implements engine.Backend: the operation went to a device
// that no longer holds its role (replaced by a fresh one since).
func (w *world) Departed(tag uint16, op engine.OpID, io engine.MemberIO) bool {
	o := w.delivering
	if o == nil || o.tag != tag || o.op != op {
		i := slices.IndexFunc(w.pending, func(o *memOp) bool { return o.tag == tag && o.op == op })
		if i < 0 {
			return false // refused in Submit: it went nowhere
		}
		o = w.pending[i]
	}
	return o.dev != w.m.devs[io.Member]
}

func (w *world) Abandon(tag uint16, op engine.OpID, io engine.MemberIO) bool {
	m := w.m
	read := io.Kind == engine.IORead
	i := slices.IndexFunc(w.pending, func(o *memOp) bool { return o.tag == tag && o.op == op })
	if i < 0 {
		m.fatalf("Abandon of tag %d op %#x, which is not pending", tag, op)
	}
	o := w.pending[i]
	if io != o.io {
		m.fatalf("Abandon of %+v names %+v", o.io, io)
	}
	if read {
		if !o.r.spare {
			if w.spares == 0 {
				m.count("abandon refused: no spare buffer")
				return false
			}
			w.spares--
			o.r.spare = true
		}
		o.r.outstanding++
	}
	w.pending = slices.Delete(w.pending, i, i+1)
	w.late = append(w.late, o)
	m.devs[io.Member].timedOut = true
	m.count("abandoned " + o.io.Kind.String())
	m.logf("  abandoned %v op %d: %v member %d %d+%d", o.r, o.op.Index(), o.io.Kind, o.io.Member, o.io.Sector, o.io.Sectors)
	return true
}

// Rebuffer implements engine.Backend: the spare reserved becomes the
// request's buffer, with its data; late reads land in the old one.
func (w *world) Rebuffer(tag uint16) []byte {
	r := w.reqs[tag]
	if r == nil || !r.spare {
		w.m.fatalf("Rebuffer of tag %d without a reserved spare", tag)
	}
	r.spare = false
	r.swaps++
	r.buf = slices.Clone(r.buf)
	return r.buf
}

func (w *world) Stale(tag uint16, op engine.OpID) {
	if !w.expectStale || w.sawStale {
		w.m.fatalf("Stale(%d, %#x) for an operation that was not abandoned", tag, op)
	}
	w.sawStale = true
}

// ---- requests ----

func (m *model) freeTags() []uint16 {
	var free []uint16
	for i, r := range m.w.reqs {
		if r == nil {
			free = append(free, uint16(i))
		}
	}
	return free
}

func (m *model) drawRange(t *rapid.T) (uint64, uint32) {
	u := m.unit
	blocks := m.size / u
	b := rapid.Uint64Range(0, blocks-1).Draw(t, "sector")
	k := rapid.Uint64Range(1, min(blocks-b, modelMaxSectors/u)).Draw(t, "count")
	return b * u, uint32(k * u)
}

// newRead makes a read request, with what it may return.
func (m *model) newRead(tag uint16, sector uint64, n uint32) *request {
	r := &request{tag: tag, op: engine.ReqRead, sector: sector, n: n, buf: make([]byte, n<<9), epoch: m.epoch,
		acc: make([][]uint64, n), accFull: make([][]uint64, n), any: make([]bool, n), alive: make([]bool, n), conc: make([]bool, n), pinnedAt: make([]bool, n), seen: make([]uint64, n)}
	for i := range uint64(n) {
		r.pinnedAt[i] = m.pinned[sector+i]
		r.acc[i] = m.acceptable(sector + i)
		r.accFull[i] = slices.Clone(m.full[sector+i])
		r.any[i] = m.undef[sector+i]
	}
	for _, o := range m.w.reqs {
		if o != nil && o.writes() && o.overlaps(sector, n) {
			r.concurrent(o)
		}
	}
	return r
}

// concurrent records that write o overlaps read r in time.
func (r *request) concurrent(o *request) {
	for s := max(r.sector, o.sector); s < min(r.sector+uint64(r.n), o.sector+uint64(o.n)); s++ {
		i := s - r.sector
		r.conc[i] = true
		if !slices.Contains(r.acc[i], o.id) {
			r.acc[i] = append(r.acc[i], o.id)
		}
		if !slices.Contains(r.accFull[i], o.id) {
			r.accFull[i] = append(r.accFull[i], o.id)
		}
	}
}

func (m *model) newWrite(tag uint16, zero bool, sector uint64, n uint32) *request {
	r := &request{tag: tag, op: engine.ReqWrite, sector: sector, n: n, buf: make([]byte, n<<9), seen: make([]uint64, n)}
	if zero {
		r.op = engine.ReqWriteZeroes
	} else {
		r.id = m.nextID
		m.nextID++
		for i := range uint64(n) {
			fillSector(r.buf[i<<9:], r.id, sector+i)
		}
	}
	for _, o := range m.w.reqs {
		if o != nil && o.op == engine.ReqRead && o.overlaps(sector, n) {
			o.concurrent(r)
		}
	}
	return r
}

func (m *model) launch(r *request, fua bool) {
	w := m.w
	w.reqs[r.tag] = r
	m.observeReq(r)
	m.logf("  start %v fua=%v", r, fua)
	sector := r.sector
	if r.op == engine.ReqFlush {
		sector = ^uint64(0) // as the block layer sends it
	}
	w.ex.Start(r.tag, r.op, sector, r.n, fua, r.buf)
}

// observe notes, for every request in flight, the copies that cannot
// serve it now.
func (m *model) observe() {
	for _, r := range m.w.reqs {
		if r != nil {
			m.observeReq(r)
		}
	}
}

func (m *model) observeReq(r *request) {
	st := m.w.arr.State()
	if r.op == engine.ReqFlush {
		r.keptDead = r.keptDead || m.keptDead()
		for mb, ms := range st.Members {
			if !writable(ms) || m.devs[mb].broken() {
				r.seenM |= 1 << mb
			}
		}
		return
	}
	var locs [engine.MaxCopies]engine.Location
	for i := range uint64(r.n) {
		for j, l := range m.g.Locate(r.sector+i, locs[:0]) {
			d, ms := m.devs[l.Member], st.Members[l.Member]
			var ok bool
			if r.op == engine.ReqRead {
				ok = readable(ms, l.Sector+1) && !d.broken() && !d.bad[l.Sector]
			} else {
				ok = writable(ms) && !d.broken()
			}
			if !ok {
				r.seen[i] |= 1 << j
			} else if r.alive != nil {
				r.alive[i] = true
			}
		}
	}
}

// lostSector returns a sector of r none of whose copies could serve it at
// some point (-1: none).
func (m *model) lostSector(r *request) int64 {
	all := uint64(1)<<m.g.Copies() - 1
	for i, s := range r.seen {
		if s == all {
			return int64(i)
		}
	}
	return -1
}

// keptDead reports whether a dead member is still active: the executor
// keeps a member that holds the last in-sync copy of some data (the
// request that hit its error fails instead, as md's last device).
// Something else (a sync job, the bitmap, a timeout) may have failed it
// since, and then some data has no active copy left.
func (m *model) keptDead() bool {
	st := m.w.arr.State()
	for r, ms := range st.Members {
		if ms.State == engine.MemberActive && (m.devs[r].dead || m.devs[r].timedOut) {
			return true
		}
	}
	var locs [engine.MaxCopies]engine.Location
	for s := uint64(0); s < m.g.ArraySectors(); s += m.g.ChunkSectors {
		ok := false
		for _, l := range m.g.Locate(s, locs[:0]) {
			ok = ok || st.Members[l.Member].State == engine.MemberActive
		}
		if !ok {
			return true
		}
	}
	return false
}

// completed checks a request's outcome and updates the reference.
func (m *model) completed(r *request, err error) {
	m.logf("  done %v: %v", r, err)
	switch r.op {
	case engine.ReqFlush:
		if errors.Is(err, engine.ErrNoCopy) && (r.keptDead || m.keptDead()) {
			m.count("flush failed on a kept last copy")
			return
		}
		if err != nil && (!errors.Is(err, engine.ErrNoCopy) || r.seenM != 1<<m.g.Members-1) {
			m.fatalf("%v failed (%v) though some member could always be flushed (seen unusable %b)", r, err, r.seenM)
		}
	case engine.ReqRead:
		m.count(fmt.Sprintf("read, failed %v", err != nil))
		if w := m.w; w.bm != nil {
			for s := r.sector; s < r.sector+uint64(r.n); s++ {
				if reg, _ := w.bm.Regions(s, 1); w.bm.NeedsSync(reg) {
					m.count("read of a region needing sync")
					break
				}
			}
		}
		if err != nil {
			if !errors.Is(err, engine.ErrNoCopy) {
				m.fatalf("%v: unexpected error %v", r, err)
			}
			if m.lostSector(r) < 0 && !m.keptDead() {
				m.fatalf("%v failed (%v) though every sector always had a copy that could serve it", r, err)
			}
			return
		}
		for i := range uint64(r.n) {
			s := r.sector + i
			if !r.alive[i] {
				m.fatalf("%v succeeded though array sector %d had no copy that could serve it", r, s)
			}
			if r.any[i] {
				continue
			}
			got := r.buf[i<<9 : (i+1)<<9]
			id, ok := sectorID(got, s)
			acc := r.acc[i]
			if r.epoch != m.epoch {
				// A fault during the read may have made another copy answer.
				acc = r.accFull[i]
			}
			if !ok || !slices.Contains(acc, id) {
				m.fatalf("%v: array sector %d reads as %s; acceptable: writes %v (candidates %v, pinned %v)\ncopies: %s",
					r, s, describe(got, s), acc, m.full[s], m.pinned[s], m.copies(s))
			}
			if m.pinned[s] && !r.conc[i] && r.epoch == m.epoch && id != m.pin[s] {
				// Another read pinned the sector while this one was in
				// flight, and no fault came: they must agree.
				m.fatalf("%v: array sector %d reads as write %d, but a read during this one answered write %d\ncopies: %s",
					r, s, id, m.pin[s], m.copies(s))
			}
			if len(r.acc[i]) > 1 {
				m.count("read sector with several candidates")
			}
			if r.pinnedAt[i] {
				m.count("read sector pinned by an earlier read")
			}
			if !r.conc[i] && r.epoch == m.epoch && len(m.full[s]) > 1 {
				m.pinned[s], m.pin[s] = true, id
			}
		}
	default:
		m.count(fmt.Sprintf("write, failed %v", err != nil))
		if err != nil {
			if !errors.Is(err, engine.ErrNoCopy) {
				m.fatalf("%v: unexpected error %v", r, err)
			}
			if errors.Is(err, engine.ErrNoCopy) && (r.keptDead || m.keptDead()) {
				m.count("write failed on a kept last copy")
			} else if m.lostSector(r) < 0 {
				m.fatalf("%v failed (%v) though every sector always had a writable copy", r, err)
			}
			for i := range uint64(r.n) {
				m.addCandidate(r.sector+i, r.id)
			}
			return
		}
		for i := range uint64(r.n) {
			s := r.sector + i
			m.full[s] = []uint64{r.id}
			m.pinned[s] = false
			m.undef[s] = false
		}
	}
}

// copies describes every copy of array sector s (failure messages).
func (m *model) copies(s uint64) string {
	var b strings.Builder
	var locs [engine.MaxCopies]engine.Location
	st := m.w.arr.State()
	for _, l := range m.g.Locate(s, locs[:0]) {
		d := m.devs[l.Member]
		fmt.Fprintf(&b, "member %d (%v, %v) sector %d: %s; ", l.Member, st.Members[l.Member], d, l.Sector, describe(d.peek(l.Sector), s))
	}
	return b.String()
}

// ---- member operations ----

// deliverable lists the pending operations whose member answers.
func (m *model) deliverable() []int {
	var idx []int
	for i, o := range m.w.pending {
		if !o.dev.hung {
			idx = append(idx, i)
		}
	}
	return idx
}

// exec carries out a member operation on its device.
func exec(o *memOp) int32 {
	d := o.dev
	n := uint64(o.io.Sectors)
	switch o.io.Kind {
	case engine.IORead:
		if d.readData(o.data, o.io.Sector) != nil {
			return eio
		}
		return int32(n << 9)
	case engine.IOWrite:
		if d.writeData(o.data, o.io.Sector) != nil {
			return eio
		}
		return int32(n << 9)
	case engine.IOWriteZeroes, engine.IODiscard:
		if d.zeroData(o.io.Sector, n) != nil {
			return eio
		}
		return 0
	case engine.IOFlush:
		if d.dead {
			return eio
		}
		return 0
	}
	panic("unknown member operation")
}

func (m *model) deliver(i int) {
	w := m.w
	o := w.pending[i]
	w.pending = slices.Delete(w.pending, i, i+1)
	res := o.execute()
	m.logf("  %v op %d: %v member %d %d+%d -> %d", o.r, o.op.Index(), o.io.Kind, o.io.Member, o.io.Sector, o.io.Sectors, res)
	w.exits++ // a repair write leaves the barrier when it ends
	w.delivering = o
	w.ex.Done(o.tag, o.op, res)
	w.delivering = nil
}

// carryOut carries pending operation i out without completing it: its
// data moves now, its completion comes later.
func (m *model) carryOut(i int) {
	o := m.w.pending[i]
	res := o.execute()
	m.logf("  %v op %d: %v member %d %d+%d carried out (%d), not completed", o.r, o.op.Index(), o.io.Kind, o.io.Member, o.io.Sector, o.io.Sectors, res)
	m.count("member op carried out before its completion")
}

// deliverLate delivers the result of an abandoned operation: a read lands
// in the buffer it was given, a write lands or not.
func (m *model) deliverLate(i int) {
	w := m.w
	o := w.late[i]
	w.late = slices.Delete(w.late, i, i+1)
	res := eio
	switch {
	case o.executed || o.io.Kind == engine.IORead:
		res = o.execute()
	case o.io.Kind == engine.IOFlush:
		res = 0
	default:
		if m.quiet || rapid.Bool().Draw(m.t, "late write lands") {
			res = o.execute()
		}
	}
	m.logf("  late %v op %d: %v member %d -> %d", o.r, o.op.Index(), o.io.Kind, o.io.Member, res)
	m.count(fmt.Sprintf("late %v (request done %v)", o.io.Kind, o.r.done))
	w.expectStale, w.sawStale = true, false
	w.delivering = o
	w.ex.Done(o.tag, o.op, res)
	w.delivering = nil
	if !w.sawStale {
		m.fatalf("the late result of an abandoned operation was not reported stale")
	}
	w.expectStale = false
	if o.io.Kind == engine.IORead {
		r := o.r
		r.outstanding--
		if r.quarantined && r.outstanding == 0 {
			r.quarantined = false
			w.spares += r.swaps
			r.swaps = 0
		}
	}
}

// ---- metadata: bitmap batches and superblocks ----

// persist asks for the current member state to be made durable (Backend.
// Persist, and the array's other callers): with a bitmap, its header gets
// the new generation first; the superblocks are written when that batch
// has committed.
func (m *model) persist() {
	w := m.w
	st := w.arr.State()
	if w.durable >= st.Gen {
		w.ex.Persisted(w.durable)
		return
	}
	for _, p := range w.persists {
		if p.st.Gen >= st.Gen {
			return
		}
	}
	ev := m.events + 1
	if w.bm != nil {
		for r, ms := range st.Members {
			if !writable(ms) {
				w.bm.SetMissing(r, true)
			}
		}
		ev = max(ev, w.bm.Events()+1)
		w.bm.SetEvents(ev)
	}
	m.events = ev
	w.persists = append(w.persists, persistReq{ev: ev, st: st, serials: m.serials()})
	m.logf("  persist gen %d as events %d", st.Gen, ev)
	if w.bm == nil && (m.quiet || rapid.Bool().Draw(m.t, "persist at once")) {
		m.completePersist(len(w.persists) - 1)
	}
}

// completePersist writes the superblocks of persist request i.
func (m *model) completePersist(i int) {
	w := m.w
	p := w.persists[i]
	w.persists = slices.Delete(w.persists, i, i+1)
	sb := superblock{events: p.ev, members: slices.Clone(p.st.Members), serials: p.serials}
	for r := range sb.members {
		if sb.members[r].State == engine.MemberRebuilding {
			// The superblocks record the durable rebuild position.
			sb.members[r].RebuildOffset = min(m.ckpt[r], sb.members[r].RebuildOffset)
		}
	}
	m.sb = sb
	m.count("superblocks written")
	w.durable = max(w.durable, p.st.Gen)
	m.logf("  superblocks: events %d %v", sb.events, sb.members)
	w.ex.Persisted(p.st.Gen)
}

// launchBatch starts writing a bitmap batch to every present member.
func (m *model) launchBatch(bt *bitmap.Batch) {
	w := m.w
	f := &flight{bt: bt}
	for r, ms := range w.arr.State().Members {
		if writable(ms) {
			for _, b := range bt.Blocks {
				f.writes = append(f.writes, blockWrite{role: r, dev: m.devs[r], blk: b})
			}
		}
	}
	w.flights = append(w.flights, f)
	m.logf("  bitmap batch %d: %d blocks, events %d", bt.Seq, len(bt.Blocks), bt.Events)
	if len(f.writes) == 0 {
		m.commit(f)
	}
}

// deliverBlock writes one block of a batch in flight; a member that fails
// it is missing for the bitmap and failed, as the array's flusher does.
func (m *model) deliverBlock(f *flight, i int) {
	w := m.w
	bw := f.writes[i]
	f.writes = slices.Delete(f.writes, i, i+1)
	if bw.dev.broken() {
		m.logf("  bitmap block %d to member %d failed", bw.blk.Index, bw.role)
		if bw.dev == m.devs[bw.role] {
			w.bm.SetMissing(bw.role, true)
			if _, changed := w.arr.Fail(bw.role); changed {
				m.persist()
			}
		}
	} else if err := bw.dev.writeRaw(bw.blk.Data, bw.blk.Offset); err != nil {
		panic(err)
	}
	if len(f.writes) == 0 {
		m.commit(f)
	}
}

func (m *model) commit(f *flight) {
	w := m.w
	w.flights = slices.DeleteFunc(w.flights, func(x *flight) bool { return x == f })
	ev := f.bt.Events
	m.logf("  bitmap batch %d committed", f.bt.Seq)
	for _, tok := range w.bm.Committed(f.bt, nil) {
		if tok>>32 != 0 || w.reqs[uint16(tok)] == nil {
			m.fatalf("bitmap released token %#x, which is no waiting request", tok)
		}
		m.count("bitmap: write resumed")
		w.ex.Resume(uint16(tok))
	}
	if ev != 0 {
		for len(w.persists) > 0 && w.persists[0].ev <= ev {
			m.completePersist(0)
		}
	}
}

// ---- sync jobs ----

// jobToStart is the job the array would start now (rebuild first, as
// StartBackground; then resync), if any.
func (m *model) jobToStart() (resync.Job, bool) {
	w := m.w
	if w.bm == nil || w.co != nil {
		return resync.Job{}, false
	}
	sig := m.stateSig()
	var targets []int
	var from uint64
	for r, ms := range w.arr.State().Members {
		if ms.State == engine.MemberRebuilding {
			if len(targets) == 0 || ms.RebuildOffset < from {
				from = ms.RebuildOffset
			}
			targets = append(targets, r)
		}
	}
	if len(targets) > 0 && w.stuck[resync.Rebuild] != sig {
		return resync.Job{Kind: resync.Rebuild, Targets: targets, Start: from}, true
	}
	for r := range w.bm.Geometry().Regions {
		if w.bm.NeedsSync(r) && w.stuck[resync.Resync] != sig {
			return resync.Job{Kind: resync.Resync}, true
		}
	}
	return resync.Job{}, false
}

// resyncDone marks regions 0..last resynced, but those marked unsynced
// since the resync started.
func (w *world) resyncDone(last int) {
	for r := 0; r <= last; r++ {
		if !w.marked[r] {
			w.bm.ResyncDone(r, r)
		}
	}
}

// startJob starts job as a coroutine and runs it to its first event.
func (m *model) startJob(job resync.Job) {
	w := m.w
	c := &coSync{ev: make(chan coEvent), reply: make(chan coReply), done: make(chan struct{})}
	job.Need = func(a, n uint64) bool { return c.call(coEvent{kind: cNeed, a: a, n: n}).ok }
	job.Progress = func(reached, durable uint64) error {
		return c.call(coEvent{kind: cProgress, reached: reached, durable: durable}).err
	}
	job.OnMemberError = func(role int, err error) { c.call(coEvent{kind: cMemberErr, role: role, err: err}) }
	c.job = job
	if job.Kind == resync.Resync {
		clear(w.marked) // it reads NeedsSync as it goes
	}
	st := w.arr.State()
	for _, t := range job.Targets {
		c.since = append(c.since, st.Members[t].Since)
	}
	sy := resync.New(w.arr, w.bar, coMembers{c}, resync.Config{Clock: modelClock{&m.now}, FlushInterval: m.flushEvery,
		RetryUnit: uint32(m.unit)})
	w.co = c
	m.logf("  sync: start %v targets %v from %d", job.Kind, job.Targets, job.Start)
	go func() {
		defer close(c.done)
		res, err := sy.Run(coCtx{context.Background(), c}, job)
		if !c.dead.Load() {
			c.ev <- coEvent{kind: cDone, res: res, err: err}
		}
	}()
	m.next()
}

// next runs the job to its next event that needs the model.
func (m *model) next() {
	w := m.w
	c := w.co
	for {
		var e coEvent
		select {
		case e = <-c.ev:
		case <-time.After(30 * time.Second):
			m.fatalf("the sync job neither calls the model nor ends")
		}
		// A range was lowered over writes the barrier turned away.
		for w.wake.Swap(false) {
			w.ex.RetryParked()
		}
		switch e.kind {
		case cErr:
			if c.inRaise {
				c.cur, c.blockedAt = &e, w.exits
				m.count("sync: blocked in Raise by user writes")
				return
			}
			c.reply <- coReply{}
			continue
		case cDone:
			<-c.done
			w.co = nil
			m.jobDone(c, e.res, e.err)
			return
		}
		c.inRaise = false
		if e.kind == cRead || e.kind == cWrite || e.kind == cFlush {
			// The array's memberIO looks the device up when called; the
			// pread or pwrite stays on it.
			e.dev = m.devs[e.role]
		}
		c.cur = &e
		return
	}
}

// canStep reports whether syncStep can do something.
func (m *model) canStep() bool {
	w := m.w
	if w.co == nil {
		_, ok := m.jobToStart()
		return ok
	}
	return w.co.cur.kind != cErr || w.exits != w.co.blockedAt
}

// syncStep answers the job's current event (or starts a job) and runs it
// to the next one.
func (m *model) syncStep() {
	w := m.w
	c := w.co
	if c == nil {
		if job, ok := m.jobToStart(); ok {
			m.startJob(job)
		}
		return
	}
	e := c.cur
	rep := coReply{}
	if e.kind != cErr {
		rep = m.handleSync(c, e)
	}
	c.cur = nil
	c.reply <- rep
	m.next()
}

func (m *model) handleSync(c *coSync, e *coEvent) coReply {
	w := m.w
	switch e.kind {
	case cRead, cWrite, cFlush:
		for _, r := range w.reqs {
			if r != nil && r.writes() && e.kind == cWrite {
				m.count("sync: " + c.job.Kind.String() + " writes with user writes in flight")
				break
			}
		}
		d := e.dev
		var err error
		switch {
		case d.dead:
			err = errIO
		case d.hung:
			err = errTimedOut
		case e.kind != cFlush && w.lateWriteOn(d):
			err = errTimedOut // as the array's memberIO
		case e.kind == cRead:
			err = d.readData(e.p, e.sector)
		case e.kind == cWrite:
			err = d.writeData(e.p, e.sector)
		}
		m.logf("  sync %v member %d %d+%d: %v", e.kind, e.role, e.sector, len(e.p)>>9, err)
		return coReply{err: err}
	case cNeed:
		first, last := w.bm.Regions(e.a, e.n)
		ok := false
		for r := first; r <= last; r++ {
			if c.job.Kind == resync.Rebuild {
				ok = ok || w.bm.Written(r) // the array's neededWritten
			} else {
				ok = ok || w.bm.NeedsSync(r) // neededResync
			}
		}
		c.inRaise = ok
		return coReply{ok: ok}
	case cProgress:
		m.logf("  sync progress %d durable %d", e.reached, e.durable)
		switch c.job.Kind {
		case resync.Rebuild:
			// The array's rebuildProgress: reads may use the targets below
			// reached; durable is the checkpoint the superblocks record.
			// Only for a target that is still the member the job started
			// on (same Since): the job checks that before it reports, but a
			// target failed and replaced while the report is on its way is
			// a new device the job's work is not on. (array/sync.go's
			// rebuildProgress and finishJob do not check Since yet.)
			kept := func(ms []engine.MemberStatus, i int) bool {
				t := c.job.Targets[i]
				return ms[t].State == engine.MemberRebuilding && ms[t].Since == c.since[i]
			}
			st := w.arr.Update(func(ms []engine.MemberStatus) {
				for i, t := range c.job.Targets {
					if kept(ms, i) && e.reached > ms[t].RebuildOffset {
						ms[t].RebuildOffset = e.reached
					}
				}
			})
			moved := false
			for i, t := range c.job.Targets {
				if kept(st.Members, i) && e.durable > m.ckpt[t] {
					m.ckpt[t], moved = e.durable, true
				}
			}
			if moved && !m.quiet && rapid.Bool().Draw(m.t, "checkpoint") {
				m.persist()
			}
		case resync.Resync:
			// resyncProgress: regions below the durable position are in sync.
			if rs := w.bm.Geometry().RegionSectors; e.durable/rs > 0 {
				w.resyncDone(int(e.durable/rs) - 1)
			}
		}
		return coReply{}
	case cMemberErr:
		m.logf("  sync member error: member %d: %v", e.role, e.err)
		// As the array's (array/sync.go): the last in-sync copy is kept.
		if _, changed, _ := w.arr.FailRedundant(e.role); changed {
			m.persist()
		}
		return coReply{}
	}
	panic("unexpected sync event " + e.kind.String())
}

// jobDone is the array's finishJob, and checks the copies.
func (m *model) jobDone(c *coSync, res resync.Result, err error) {
	w := m.w
	m.logf("  sync: %v ended at %d (synced %d, skipped %d): %v", c.job.Kind, res.End, res.Synced, res.Skipped, err)
	m.count(fmt.Sprintf("sync: %v ended, error %v", c.job.Kind, err != nil))
	if err != nil {
		var merr *resync.MemberError
		if !errors.As(err, &merr) && !errors.Is(err, engine.ErrNoCopy) && !errors.Is(err, resync.ErrTargetGone) {
			m.fatalf("%v failed: %v", c.job.Kind, err)
		}
		w.stuck[c.job.Kind] = m.stateSig()
		return
	}
	switch c.job.Kind {
	case resync.Resync:
		w.resyncDone(w.bm.Geometry().Regions - 1)
	case resync.Rebuild:
		done := make([]bool, len(c.job.Targets))
		st := w.arr.Update(func(ms []engine.MemberStatus) {
			for i, t := range c.job.Targets {
				if ms[t].State == engine.MemberRebuilding && ms[t].Since == c.since[i] {
					ms[t] = engine.MemberStatus{State: engine.MemberActive}
					done[i] = true
				}
			}
		})
		for i, t := range c.job.Targets {
			if done[i] && st.Members[t].State == engine.MemberActive {
				w.bm.SetMissing(t, false)
				m.ckpt[t] = 0
			}
		}
		m.persist()
	}
	m.checkCopies(c.job.Kind.String(), false)
}

// checkCopies checks that every readable copy of every written sector is
// the same, except where a write is in flight or the bitmap says the
// copies may differ (final: nothing may need sync any more).
func (m *model) checkCopies(what string, final bool) {
	w := m.w
	st := w.arr.State()
	busy := make([]bool, m.size)
	for _, r := range w.reqs {
		if r != nil && r.writes() {
			for s := r.sector; s < r.sector+uint64(r.n); s++ {
				busy[s] = true
			}
		}
	}
	var locs [engine.MaxCopies]engine.Location
	for s := range m.size {
		if w.bm != nil {
			if r, _ := w.bm.Regions(s, 1); w.bm.NeedsSync(r) {
				if final && w.stuck[resync.Resync] != m.stateSig() {
					m.fatalf("%s: region %d still needs sync", what, r)
				}
				continue
			}
		}
		if m.undef[s] || busy[s] {
			continue
		}
		var ref []byte
		var refL engine.Location
		for _, l := range m.g.Locate(s, locs[:0]) {
			d := m.devs[l.Member]
			if !readable(st.Members[l.Member], l.Sector+1) || d.broken() || d.bad[l.Sector] {
				continue
			}
			p := d.peek(l.Sector)
			if ref == nil {
				ref, refL = p, l
			} else if !bytes.Equal(p, ref) {
				m.fatalf("%s: array sector %d: the copy on member %d (%s) differs from member %d's (%s); candidates %v",
					what, s, l.Member, describe(p, s), refL.Member, describe(ref, s), m.full[s])
			}
		}
	}
}

// ---- crash and replacement ----

// tear applies a write in flight at a crash: all of it, none, or a prefix
// of whole sectors.
func (m *model) tear(d *device, sector uint64, p []byte, what string) {
	n := len(p) >> 9
	k := rapid.IntRange(0, n).Draw(m.t, what+" lands (sectors)")
	switch {
	case k == 0:
		m.count("crash: " + what + " lost")
	case k < n:
		m.count("crash: " + what + " torn")
	default:
		m.count("crash: " + what + " landed")
	}
	if k > 0 && !d.dead {
		if err := d.writeData(p[:k<<9], sector); err != nil {
			panic(err)
		}
	}
}

func (m *model) crash() {
	w := m.w
	m.logf("  crash")
	for _, o := range append(slices.Clone(w.pending), w.late...) {
		if o.executed {
			continue // it landed already
		}
		switch o.io.Kind {
		case engine.IOWrite:
			m.tear(o.dev, o.io.Sector, o.data, "in-flight write")
		case engine.IOWriteZeroes, engine.IODiscard:
			m.tear(o.dev, o.io.Sector, make([]byte, o.io.Sectors<<9), "in-flight write-zeroes")
		}
	}
	for _, f := range w.flights {
		for _, bw := range f.writes {
			k := rapid.IntRange(0, len(bw.blk.Data)>>9).Draw(m.t, "bitmap block lands (sectors)")
			m.count(fmt.Sprintf("crash: bitmap block write %d/8 sectors", k))
			if k > 0 && !bw.dev.dead {
				if err := bw.dev.writeRaw(bw.blk.Data[:k<<9], bw.blk.Offset); err != nil {
					panic(err)
				}
			}
		}
	}
	if c := w.co; c != nil {
		m.count("crash: sync job running")
		if c.cur != nil && c.cur.kind == cWrite && !c.cur.dev.broken() {
			m.tear(c.cur.dev, c.cur.sector, c.cur.p, "sync write")
		}
		c.kill()
		w.co = nil
	}
	for _, r := range w.reqs {
		if r != nil && r.writes() {
			m.count("crash: write request in flight")
			for s := r.sector; s < r.sector+uint64(r.n); s++ {
				m.addCandidate(s, r.id)
			}
		}
	}
	for _, d := range m.devs {
		d.hung = false // a power cycle resets it
		d.timedOut = false
	}
	m.boot(false)
}

// ---- actions ----

// action is one kind of step of a run: how often it is drawn, whether it
// applies now, what it does.
type action struct {
	name   string
	weight int
	can    func() bool
	do     func(t *rapid.T)
}

// profiles reweight the actions of a run: besides the balanced weights of
// actions(), runs with many crashes and no member faults, and runs with
// many member faults, timeouts and replacements.
var profiles = map[string]map[string]int{
	"balanced": {},
	"crashes":  {"fail member": 0, "hang member": 0, "bad sectors": 0, "crash": 3, "sync": 8},
	"faults": {"hang member": 2, "bad sectors": 4, "time": 4, "late result": 5, "replace member": 4,
		"spare buffer": 2},
}

// run draws and runs a sequence of actions (rapid shrinks both the length
// and the choices).
func (m *model) run(t *rapid.T) {
	acts := m.actions()
	profile := rapid.SampledFrom(slices.Sorted(maps.Keys(profiles))).Draw(t, "profile")
	for name, w := range profiles[profile] {
		i := slices.IndexFunc(acts, func(a action) bool { return a.name == name })
		if i < 0 {
			panic("profile " + profile + " weighs an unknown action " + name)
		}
		acts[i].weight = w
	}
	m.count("profile " + profile)
	steps := rapid.IntRange(0, 150).Draw(t, "steps")
	m.settle()
	for range steps {
		var ok []action
		total := 0
		for _, a := range acts {
			if a.can == nil || a.can() {
				ok = append(ok, a)
				total += a.weight
			}
		}
		k := rapid.IntRange(0, total-1).Draw(t, "action")
		for _, a := range ok {
			if k -= a.weight; k < 0 {
				m.steps++
				m.logf("step %d: %s", m.steps, a.name)
				a.do(t)
				m.count("action " + a.name)
				break
			}
		}
		m.settle()
	}
}

func (m *model) actions() []action {
	always := func() bool { return true }
	tagFree := func() bool { return len(m.freeTags()) > 0 }
	write := func(zero bool) func(t *rapid.T) {
		return func(t *rapid.T) {
			tag := rapid.SampledFrom(m.freeTags()).Draw(t, "tag")
			sector, n := m.drawRange(t)
			for _, o := range m.w.reqs {
				// Overlapping writes in flight would leave the copies in
				// any order: the block layer promises nothing there. The
				// write is moved after the other one.
				if o != nil && o.writes() && o.overlaps(sector, n) {
					return
				}
			}
			fua := !zero && rapid.Bool().Draw(t, "fua")
			m.launch(m.newWrite(tag, zero, sector, n), fua)
		}
	}
	return []action{
		{"read", 4, tagFree, func(t *rapid.T) {
			tag := rapid.SampledFrom(m.freeTags()).Draw(t, "tag")
			sector, n := m.drawRange(t)
			m.launch(m.newRead(tag, sector, n), false)
		}},
		{"write", 4, tagFree, write(false)},
		{"write-zeroes", 1, tagFree, write(true)},
		{"flush", 1, tagFree, func(t *rapid.T) {
			tag := rapid.SampledFrom(m.freeTags()).Draw(t, "tag")
			m.launch(&request{tag: tag, op: engine.ReqFlush}, false)
		}},
		{"deliver", 8, func() bool { return len(m.deliverable()) > 0 }, func(t *rapid.T) {
			for range rapid.IntRange(1, 4).Draw(t, "ops") {
				idx := m.deliverable()
				if len(idx) == 0 {
					break
				}
				m.deliver(idx[rapid.IntRange(0, len(idx)-1).Draw(t, "op")])
			}
		}},
		{"carry out", 2, func() bool { return len(m.deliverable()) > 0 }, func(t *rapid.T) {
			idx := m.deliverable()
			m.carryOut(idx[rapid.IntRange(0, len(idx)-1).Draw(t, "op")])
		}},
		{"metadata", 5, func() bool { return m.w.bm != nil || len(m.w.persists) > 0 }, func(t *rapid.T) {
			w := m.w
			if w.bm == nil {
				m.completePersist(0)
				return
			}
			choices := []string{"prepare", "tick", "flush"}
			if len(w.flights) > 0 {
				choices = append(choices, "write", "write", "write")
			}
			switch rapid.SampledFrom(choices).Draw(t, "bitmap") {
			case "prepare":
				if bt := w.bm.Prepare(); bt != nil {
					m.launchBatch(bt)
				}
			case "tick":
				if bt := w.bm.Tick(time.Duration(m.now.Load())); bt != nil {
					m.launchBatch(bt)
				}
			case "write":
				f := w.flights[rapid.IntRange(0, len(w.flights)-1).Draw(t, "batch")]
				m.deliverBlock(f, rapid.IntRange(0, len(f.writes)-1).Draw(t, "block write"))
			case "flush":
				m.flushBitmap()
			}
		}},
		{"sync", 4, m.canStep, func(t *rapid.T) {
			for range rapid.IntRange(1, 40).Draw(t, "sync steps") {
				if !m.canStep() {
					break
				}
				m.syncStep()
			}
		}},
		{"progress", 3, always, func(t *rapid.T) { m.progress() }},
		{"time", 2, always, func(t *rapid.T) {
			d := time.Duration(rapid.IntRange(1, 20).Draw(t, "seconds")) * time.Second
			m.now.Add(int64(d))
			m.w.exits++ // abandoned repair writes leave the barrier
			m.w.ex.Tick()
		}},
		{"late result", 3, func() bool { return len(m.w.late) > 0 }, func(t *rapid.T) {
			m.deliverLate(rapid.IntRange(0, len(m.w.late)-1).Draw(t, "late op"))
		}},
		{"spare buffer", 1, always, func(t *rapid.T) { m.w.spares++ }},
		{"fail member", 1, always, func(t *rapid.T) {
			r := rapid.IntRange(0, m.g.Members-1).Draw(t, "member")
			m.devs[r].dead = true
			m.logf("  member %d (%v) dies", r, m.devs[r])
			m.unpin()
		}},
		{"hang member", 1, always, func(t *rapid.T) {
			r := rapid.IntRange(0, m.g.Members-1).Draw(t, "member")
			m.devs[r].hung = true
			m.logf("  member %d (%v) hangs", r, m.devs[r])
			m.unpin()
		}},
		{"bad sectors", 1, always, func(t *rapid.T) {
			r := rapid.IntRange(0, m.g.Members-1).Draw(t, "member")
			blocks := m.g.MemberSectors / m.unit
			b := rapid.Uint64Range(0, blocks-1).Draw(t, "first")
			k := rapid.Uint64Range(1, min(blocks-b, 2)).Draw(t, "blocks")
			for s := b * m.unit; s < (b+k)*m.unit; s++ {
				m.devs[r].bad[s] = true
			}
			m.logf("  member %d: bad sectors %d+%d", r, b*m.unit, k*m.unit)
			m.unpin()
		}},
		{"crash", 1, always, func(t *rapid.T) { m.crash() }},
		{"replace member", 2, func() bool {
			// The array rewrites the bitmap on its flusher thread, between
			// batches.
			return m.redundant && len(m.w.flights) == 0 && len(m.replaceable()) > 0
		}, func(t *rapid.T) {
			w := m.w
			r := rapid.SampledFrom(m.replaceable()).Draw(t, "role")
			m.devs[r] = m.newDevice(true)
			m.logf("  member %d replaced by %v", r, m.devs[r])
			w.arr.Update(func(ms []engine.MemberStatus) { ms[r] = engine.MemberStatus{State: engine.MemberRebuilding} })
			m.ckpt[r] = 0
			w.bm.RewriteAll()
			m.persist()
		}},
	}
}

// replaceable lists the roles a new member may be put into.
func (m *model) replaceable() []int {
	var roles []int
	for r, ms := range m.w.arr.State().Members {
		if ms.State == engine.MemberFaulty || ms.State == engine.MemberMissing {
			roles = append(roles, r)
		}
	}
	return roles
}

// settle runs after every action: writes turned away by the barrier are
// retried once it is lowered, reads forget what they saw once a member
// stopped serving, and requests in flight note the copies that cannot
// serve them.
func (m *model) settle() {
	w := m.w
	for w.wake.Swap(false) {
		m.count("barrier: parked writes retried")
		w.ex.RetryParked()
	}
	now := states(w.arr.State())
	for r, s := range now {
		if s != m.last[r] && (s == engine.MemberFaulty || s == engine.MemberMissing) {
			m.unpin()
		}
	}
	m.last = now
	m.observe()
}

// ---- the end ----

// finish lets everything in flight complete and every job needed run,
// reads the whole array back and checks that the copies are equal.
func (m *model) finish() {
	m.quiet = true
	m.logf("finish")
	m.quiesce()
	m.silent = true
	for s := uint64(0); s < m.size; {
		n := uint32(min(modelMaxSectors, m.size-s))
		if m.readBack(s, n) != nil {
			for u := s; u < s+uint64(n); u += m.unit {
				m.readBack(u, uint32(m.unit))
			}
		}
		s += uint64(n)
	}
	m.silent = false
	m.checkCopies("at the end", true)
}

func (m *model) readBack(sector uint64, n uint32) error {
	r := m.newRead(0, sector, n)
	m.launch(r, false)
	m.quiesce()
	if !r.done {
		m.fatalf("read %v never completed", r)
	}
	return r.err
}

// quiesce runs the stack until nothing is in flight and no job is needed:
// operations are delivered in order, hung members time out, batches are
// written and committed, jobs run to their end.
func (m *model) quiesce() {
	w := m.w
	w.spares = 1 << 20
	for iter := 0; ; iter++ {
		if iter > 1_000_000 {
			m.fatalf("the stack does not settle")
		}
		m.settle()
		if idx := m.deliverable(); len(idx) > 0 {
			m.deliver(idx[0])
			continue
		}
		if len(w.pending) > 0 {
			m.now.Add(int64(modelTimeout))
			w.exits++
			w.ex.Tick()
			continue
		}
		if w.bm != nil {
			if len(w.flights) > 0 {
				m.deliverBlock(w.flights[0], 0)
				continue
			}
			if bt := w.bm.Prepare(); bt != nil {
				m.launchBatch(bt)
				continue
			}
		} else if len(w.persists) > 0 {
			m.completePersist(0)
			continue
		}
		if m.canStep() {
			m.syncStep()
			continue
		}
		break
	}
	for _, r := range w.reqs {
		if r != nil {
			m.fatalf("%v still in flight with nothing left to do (parked %d)", r, w.ex.Parked())
		}
	}
	if w.co != nil {
		m.fatalf("the sync job waits for nothing (%v)", w.co.cur.kind)
	}
	if len(w.persists) > 0 {
		m.fatalf("a persist never completed")
	}
}
