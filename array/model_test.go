package array

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// TestArrayModel is a model-based test of the whole array: the real
// Array (Open creating and assembling, superblocks and the write-intent
// bitmap on the members, its flusher, Fail, Remove, ReAdd,
// ReplaceMember, AddSpares, spare activation, Check and Repair, rebuilds
// and resyncs with their checkpoints, SetClean and Close) and its real
// queue handlers (several queues: Handle, Submit, Complete, Abandon,
// Stale, bitmap waits and wake-ups, fixed-file updates) on in-memory
// members (package memdev) with volatile write caches.
//
// rapid draws the steps: user reads, writes (FUA or not), flushes,
// discards and write-zeroes on any queue; the delivery of member
// operations in any order; the queue clock passing the member timeout
// (hung operations are abandoned); member faults (EIO on a range, discard
// and write-zeroes unsupported, hangs and their release); fail, remove,
// re-add, replace, add spare, check, repair, waiting for the background
// job; del and assembly again (members in any order, or a subset);
// kill -9 and restart (the caches stay); power cuts (each member keeps any
// subset of its cached sectors), at once or in the middle of a later
// member write (that write torn: superblock and bitmap writes too), and
// reboot; online grow (disks grown in place, each with its own leftovers
// in the added space, to a little more or past what the bitmap area holds
// at its region size, which doubles it; then the daemon's sequence:
// GrowCheck on the serving array, the hand-over, assembly, Grow, possibly
// cut by a power cut, and the array served again).
//
// The reference is per array sector (in two windows of the array: its
// start, and its end at creation with the space a grow adds after it): the
// values a read may return now, and the values a power cut may leave
// (the last write acknowledged before a completed FLUSH, or written with
// FUA, and anything written after). Checked after every step:
// (a) durability: every read returns one of the sector's values; after a
// power cut only what may have survived; (b) stability: with no write
// in between, a sector reads what it read before, whichever copy serves
// it; (c) convergence: with no job running and none needed, the in-sync
// copies are equal over the window (but where a discard left them free to
// differ); (d) availability: assembly of every member that holds a role
// succeeds (a power cut tears at most one superblock write), and no
// member the array had failed or left out comes back in sync without a
// rebuild; (f) grow: a refusal does no I/O (raid10 far is always
// refused), a grow gives the planned size to the array and its
// bitmap, and the grown bitmap keeps each region written and dirty where
// a region it merges was, and dirty where written data shares it with
// never-written space; (a) to (d) hold over the grown size;
// (e) liveness: no panic, every request completes (a bound on
// the model's own waits, far above any legitimate time), every job ends.
//
// Determinism: the queue handlers run on the test's goroutine, their
// member operations complete when rapid says. The bitmap flusher and the
// background jobs run on their own goroutines, as in the array; the model
// waits for them by events (a queue wake-up, the job's end), never by
// time; the results checked do not depend on how they interleave. Their
// interleaving with the steps is not drawn by rapid, so a failure may
// shrink less well than in resync's model.
//
// Levels: raid1 (2 or 3 members), raid10 (n2, f2, o2 on 2 to 4
// members, 8 KiB chunks), raid5 (3 to 5 members) and raid6 (4 to 6), both
// in md's four layouts with 8 KiB chunks, drawn; -array.level=1, 10, 5 or
// 6 draws one only. For raid5/6, convergence is every in-sync stripe's P
// (and Q) equal to the parity of its data; discard and write-zeroes are
// not drawn (not served), nor zero copy; grow is always refused; an
// assembly refused as dirty and degraded is forced, as an operator
// would (what the crash left is then tolerated: writeHole); and the write
// hole is not tolerated otherwise (the write-hole log closes it: a read
// of a sector returns its data after any crash and member loss;
// -array.hole tolerates it as before the log). Not modelled: raid0, split brains (two
// daemons), the daemon and its state file, the kernel's re-issue of
// requests in flight at a kill -9 (they count as failed writes) and at a
// grow's hand-over (they complete before it), the state file's record of
// a grow (GrowFromSectors) and UPDATE_SIZE, bitmap
// regions cleared by the idle timer (cleared on clean stops only),
// hangs of the synchronous metadata and sync I/O are bounded by a real
// member timeout (time passes, but the outcome does not depend on it).
//
// go test runs rapid's default 100 sequences (-rapid.checks=N for long
// runs; -short runs 20).
func TestArrayModel(t *testing.T) {
	if testing.Short() && !flagSet("rapid.checks") {
		flag.Set("rapid.checks", "20")
		defer flag.Set("rapid.checks", "100")
	}
	var cov coverage
	// The dead arrays' Closes end before the test does: their jobs would
	// go on into later tests and call the hooks those install
	// (writeSuperblock), a data race -race found in CI.
	defer func() {
		done := make(chan struct{})
		go func() { modelCloses.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * modelWaitMax):
			if t.Failed() {
				// A sequence that failed mid-step left requests no queue
				// serves any more: their Closes wait for them.
				break
			}
			buf := make([]byte, 4<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("liveness: dead arrays did not close within %v\n%s", 2*modelWaitMax, buf)
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		m := newArrayModel(rt)
		m.cov = &cov
		defer m.cleanup()
		m.run(rt)
	})
	t.Logf("coverage over all runs: %s", cov.String())
}

// modelCloses counts the dead arrays being closed off the test goroutine.
var modelCloses sync.WaitGroup

// closeLater closes a off the test goroutine (a dead process's array: its
// Close waits out member timeouts).
func closeLater(a *Array) {
	modelCloses.Add(1)
	go func() {
		defer modelCloses.Done()
		a.Close()
	}()
}

// modelLevel restricts the levels drawn (0: raid1, raid10, raid5 and raid6).
// modelTimeout is the member timeout: on the queues' clock, and in wall
// time for metadata and sync I/O. A short one (-array.timeout=2ms) makes
// the wall-time timeouts fire on a loaded machine as on a slow disk.
var modelTimeout = flag.Duration("array.timeout", 200*time.Millisecond, "TestArrayModel: member timeout (at least 2ms)")

// modelHole: tolerate the raid5/6 write hole (writeHole), as the model did
// before the write-hole log closed it.
var modelHole = flag.Bool("array.hole", false, "TestArrayModel: tolerate reads the raid5/6 write hole explains")

var modelLevel = flag.Int("array.level", 0, "TestArrayModel: draw only this level (1, 10, 5 or 6; 0: all)")

// flagSet reports whether the flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// coverage counts what the runs got to (go test -v).
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
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c.n)) {
		fmt.Fprintf(&b, "\n  %-44s %d", k, c.n[k])
	}
	return b.String()
}

const (
	modelWindow = 512 // array sectors under test (4 bitmap regions)
	// modelHigh: a second window of array sectors, from modelHighBack
	// sectors before the created array's end on (the old end, and the
	// space a grow adds after it)
	modelHigh     = 256
	modelHighBack = 64
	// modelBigDisk: the size of disks grown for a bitmap region size
	// doubling (the area of one 4 KiB data block holds 4080 regions of
	// 64 KiB: 255 MiB of array)
	modelBigDisk  = 264 << 20
	modelRegion   = 128           // bitmap region, sectors
	modelDisk     = 4<<20 + 8<<10 // bytes (the array ends inside a bitmap region)
	modelQueues   = 2
	modelDepth    = 6
	modelMaxIO    = 16 << 9
	modelWaitMax  = 20 * time.Second // liveness bound on the model's waits
	modelMaxSteps = 60
)

// sectorRef is the reference of one array sector.
type sectorRef struct {
	cur     map[uint64]bool // write ids a read may return (0: zeroes)
	dur     []durVal        // what a power cut may leave
	wr      uint64          // write in flight (id+1; 0: none)
	wrSeq   uint64
	lastSeq uint64 // seq of the newest write submitted to the sector
	unknown bool   // a discard: the copies may hold anything until a write
	// crash: what the sector could read as after the last kill or power
	// cut (nil once a write of it completed since). The copies may differ there until
	// the resync; reads answer from the chosen copy, and if that member
	// fails first another copy's value becomes the answer (md does the
	// same: the data it read is gone with the member).
	crash map[uint64]bool
}

type durVal struct{ id, seq uint64 }

type modelReq struct {
	q       int
	tag     uint16
	op      uint8
	fua     bool
	sector  uint64
	sectors uint32
	id      uint64            // write id
	seq     uint64            // when it started
	crash   []map[uint64]bool // a read's: its sectors' crash values at its start
	snap    []map[uint64]bool
}

// modelRing is a queue's ring: member operations wait in pending until
// the model delivers them.
type modelRing struct {
	m       *arrayModel
	id      int
	bufs    [][]byte
	bufIdx  []int
	spares  []int
	pending []ringOp
	done    []ringDone
	woken   atomic.Bool
	wake    chan struct{}
	h       *queue
	served  []bool // tag in use
	// poison: with zero copy, the buffers the handler is given (address
	// space only: the data is in bufs, which only member I/O reaches, as
	// a zero-copy request's pages), so that a handler touching them
	// serves or writes wrong data
	poison [][]byte
}

// reqBuf is the buffer the handler gets for tag's request.
func (r *modelRing) reqBuf(tag int) []byte {
	if r.m.zeroCopy {
		b := r.poison[tag]
		for i := range b {
			b[i] = 0xee
		}
		return b
	}
	return r.bufs[r.bufIdx[tag]]
}

type ringOp struct {
	// fail: the operation answers with an error when delivered (it was
	// out when its stalled disk came back failing: an NVMe timeout ends in
	// an abort)
	fail bool
	ud   uint64
	m    *Member
	io   engine.MemberIO
	off  uint64
	data []byte
}

type ringDone struct {
	tag uint16
	err error
}

func (r *modelRing) ID() int         { return r.id }
func (r *modelRing) Depth() int      { return modelDepth }
func (r *modelRing) MaxIOBytes() int { return modelMaxIO }
func (r *modelRing) Now() time.Time  { return r.m.now }
func (r *modelRing) Wake() {
	r.woken.Store(true)
	select {
	case r.m.wake <- struct{}{}:
	default:
	}
}
func (r *modelRing) SetTargetFile(i, fd int) error { return nil }
func (r *modelRing) Complete(tag uint16, err error) {
	r.done = append(r.done, ringDone{tag, err})
}

// ZeroCopy: the queue serves as a zero-copy ublk queue does (the
// request's data is its own buffer, and reap takes a request only once no
// member operation on it is out: the kernel completes it no sooner).
func (r *modelRing) ZeroCopy() bool { return r.m.zeroCopy }
func (r *modelRing) ReserveBuffer() (int, bool) {
	if r.m.zeroCopy {
		r.m.fail("zero copy: a spare buffer was asked for (a request's pages cannot be swapped)")
	}
	n := len(r.spares)
	if n == 0 {
		// As ublk.Queue: another buffer rather than a request waiting
		// for a member that may never answer.
		r.bufs = append(r.bufs, make([]byte, modelMaxIO))
		return len(r.bufs) - 1, true
	}
	b := r.spares[n-1]
	r.spares = r.spares[:n-1]
	return b, true
}
func (r *modelRing) SwapBuffer(tag uint16, spare, n int) int {
	if r.m.zeroCopy {
		r.m.fail("zero copy: a request's buffer was swapped")
	}
	copy(r.bufs[spare][:n], r.bufs[r.bufIdx[tag]][:n])
	old := r.bufIdx[tag]
	r.bufIdx[tag] = spare
	return old
}
func (r *modelRing) ReleaseBuffer(b int) { r.spares = append(r.spares, b) }
func (r *modelRing) Buffer(tag uint16) []byte {
	if r.m.zeroCopy {
		r.m.fail("zero copy: a request's buffer was asked for (Rebuffer)")
	}
	r.m.count("read given up: the request reads on in another buffer")
	return r.bufs[r.bufIdx[tag]]
}
func (r *modelRing) Fail(err error) { panic(err) }

func (r *modelRing) SubmitMember(ud uint64, tag uint16, m *Member, fixed bool, io engine.MemberIO, off uint64, data []byte) error {
	if r.m.zeroCopy && (io.Kind == engine.IORead || io.Kind == engine.IOWrite) {
		// A zero-copy request's pages go one way only: the kernel
		// refuses (EFAULT) a write from a READ's or a read into a WRITE's.
		if req := r.m.reqs[[2]int{r.id, int(tag)}]; req != nil && (io.Kind == engine.IORead) != (req.op == ublk.IOOpRead) {
			r.m.fail("zero copy: member %v for request op %d (tag %d): the kernel refuses that direction", io.Kind, req.op, tag)
		}
	}
	if r.m.zeroCopy && len(data) > 0 {
		// The data lives in the request's pages: the same offset there.
		p := r.poison[tag]
		o := int(uintptr(unsafe.Pointer(unsafe.SliceData(data))) - uintptr(unsafe.Pointer(unsafe.SliceData(p))))
		if o < 0 || o+len(data) > len(p) {
			r.m.fail("zero copy: member %v data is not in request %d's buffer", io.Kind, tag)
		}
		data = r.bufs[r.bufIdx[tag]][o : o+len(data)]
	}
	r.pending = append(r.pending, ringOp{ud: ud, m: m, io: io, off: off, data: data})
	return nil
}

type arrayModel struct {
	t     *rapid.T
	cov   *coverage
	rack  *memdev.Rack
	disks []string // every disk's path
	level int
	n     int // roles
	// zeroCopy: the queues are zero copy (modelRing.ZeroCopy)
	zeroCopy bool
	// tightBuffers: raid5/6 queues that serve the requests needing a
	// stripe buffer one at a time (Array.paritySerialBuffers).
	tightBuffers bool
	// garbage: the disks held different data before the array (drawn).
	garbage bool
	a       *Array
	rings   []*modelRing
	wake    chan struct{}
	now     time.Time
	ref     []sectorRef
	seq     uint64
	ids     uint64
	// flushed: the seq of the newest flush whose completion was applied
	flushed uint64
	// inSyncAtCrash: the disks in sync at the assembly after the last
	// kill or power cut (see sectorRef.crash)
	inSyncAtCrash map[string]bool
	// copyLost: a copy in sync at some crash's assembly was lost before a
	// later crash (see sectorRef.crash)
	copyLost bool
	// forcedDirty: a raid5/6 assembly refused as dirty and degraded was
	// forced, as an operator would (see writeHole)
	forcedDirty bool
	repairs     uint64               // the array's ReadRepairs seen (coverage)
	reqs        map[[2]int]*modelReq // by queue, tag
	hung        map[string]bool      // queue operations not delivered
	// devHung: every operation on the disk waits (memdev Hang)
	devHung map[string]bool
	// stallErr: the stalled disk's operations out at its release fail
	stallErr map[string]bool
	// stale: disks that hold no current copy (failed, removed, left out
	// of an assembly) until a rebuild of them ends.
	stale      map[string]bool
	staleKnown bool // stale is what the disks record (a clean stop)
	cutArmed   bool
	// lost: the array had no in-sync member left when it stopped (it
	// failed; assembly may refuse it). over: no array to go on with.
	lost, lostBefore, over bool
	logMu                  sync.Mutex
	log                    []string
	// e0: the array's size at its creation; the reference's sectors from
	// modelWindow on are the array's from hiBase on
	e0, hiBase uint64
	// diskSize: each disk's size (disks grow in place)
	diskSize map[string]int64
	// grownTo: the array size the last grow that succeeded gave (its
	// superblocks durable on every member): no assembly is smaller
	grownTo uint64
	// growWatch: the goroutine calling GrowCheck or a refused Grow (0:
	// none); the device I/O it or goroutines it starts make is counted
	// in growIO (dead arrays' is not: their devices answer ErrKilled)
	growWatch atomic.Int64
	growIO    atomic.Int64
}

func newArrayModel(t *rapid.T) *arrayModel {
	seed := rapid.Uint64().Draw(t, "seed")
	m := &arrayModel{t: t, rack: memdev.NewRack(rand.New(rand.NewPCG(seed, 1))), level: 1,
		wake: make(chan struct{}, 1), now: time.Unix(1000, 0), reqs: map[[2]int]*modelReq{},
		hung: map[string]bool{}, devHung: map[string]bool{}, stallErr: map[string]bool{}, stale: map[string]bool{}}
	// raid10 found a write that failed on a member kept as the last copy
	// of other chunks leaving its own chunk's copies different with no
	// resync (fixed: the range is marked unsynced), superblock updates
	// leaving one of several last copies generations behind (fixed:
	// members behind go first, no superblock write follows a given-up
	// one, and an update no superblock took leaves its generation to the
	// next), and a read of an unsynced range served by the other copy
	// while the chosen one was fenced by a given-up write (fixed: it
	// fails).
	switch *modelLevel {
	case 0:
		m.level = rapid.SampledFrom([]int{1, 10, 5, 6}).Draw(t, "level")
	case 1, 10, 5, 6:
		m.level = *modelLevel
	default:
		t.Fatalf("-array.level=%d: 1, 10, 5, 6 or 0 (all)", *modelLevel)
	}
	var layout engine.Layout
	var playout engine.ParityLayout
	switch m.level {
	case 10:
		// Chunks of 8 KiB: the window spans many, over every member.
		// Odd counts wrap near copies across rows, as md's do.
		layout = rapid.SampledFrom([]engine.Layout{engine.LayoutN2, engine.LayoutF2, engine.LayoutO2,
			engine.LayoutN3, engine.LayoutF3, engine.LayoutO3}).Draw(t, "layout")
		m.n = rapid.IntRange(layout.Copies(), 5).Draw(t, "members")
	case 5, 6:
		// Chunks of 8 KiB as raid10's; md's minimum member counts.
		m.n = rapid.IntRange(m.level-2, m.level).Draw(t, "members")
		playout = engine.ParityLayout(rapid.IntRange(0, 3).Draw(t, "parity layout"))
	default:
		m.n = rapid.IntRange(2, 3).Draw(t, "members")
	}
	m.diskSize = map[string]int64{}
	for i := range m.n + 2 {
		p := fmt.Sprintf("/m%d", i)
		m.rack.AddDisk(p, modelDisk)
		m.disks = append(m.disks, p)
		m.diskSize[p] = modelDisk
	}
	// (Parity levels compute on the data: no zero copy.)
	m.zeroCopy = !m.parity() && rapid.Bool().Draw(t, "zero copy")
	m.tightBuffers = m.parity() && rapid.Bool().Draw(t, "tight stripe buffers")
	// Disks that held data before, different on each: never-written data
	// then reads as anything (write id 0 stands for it), and a region's
	// copies converge once it was written and synced.
	if m.garbage = rapid.Bool().Draw(t, "garbage"); m.garbage {
		for i, p := range m.disks {
			g := make([]byte, modelDisk)
			for j := range g {
				g[j] = byte(i*37+1) ^ byte(j>>9) ^ byte(j*7)
			}
			m.rack.Preload(m.rack.Disk(p), 0, g)
		}
	}
	m.ref = make([]sectorRef, modelWindow+modelHigh)
	for i := range m.ref {
		m.ref[i].cur = map[uint64]bool{0: true}
		m.ref[i].dur = []durVal{{0, 0}}
	}
	spec := m.spec()
	spec.Level = engine.Level1
	switch m.level {
	case 10:
		spec.Level, spec.Layout, spec.ChunkSectors = engine.Level10, layout, 16
	case 5, 6:
		spec.Level, spec.ParityLayout, spec.ChunkSectors = engine.Level(m.level), playout, 16
	}
	spec.RegionSectors = modelRegion
	a, err := Open(m.disks[:m.n], spec, true)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	m.e0 = a.Engine.ArraySectors()
	m.hiBase = m.e0 - modelHighBack
	m.start(a)
	return m
}

// arr is the array sector of the reference's sector i.
func (m *arrayModel) arr(i uint64) uint64 {
	if i < modelWindow {
		return i
	}
	return m.hiBase + i - modelWindow
}

// size is the array's size now (sectors).
func (m *arrayModel) size() uint64 { return m.a.Engine.ArraySectors() }

// parity reports whether the array is raid5 or raid6.
func (m *arrayModel) parity() bool { return m.level == 5 || m.level == 6 }

// leftovers reports whether reference sector i may read as what the
// devices held before (never written): disks that held data, or space a
// grow added (each disk's holds its own leftovers).
func (m *arrayModel) leftovers(i uint64) bool { return m.garbage || m.arr(i) >= m.e0 }

func (m *arrayModel) spec() CreateSpec {
	open := m.rack.Opener() // this process's: a dead array opens nothing
	return CreateSpec{Level: -1, SyncMinBytes: 1 << 40, OpenDevice: func(p string) (Device, error) {
		d, err := open(p)
		if err != nil {
			return nil, err
		}
		return loggedDev{d, m}, nil
	}}
}

// loggedDev logs the errors of the array's synchronous member I/O.
type loggedDev struct {
	*memdev.Dev
	m *arrayModel
}

func (d loggedDev) note(what string, off int64, err error) error {
	if g := d.m.growWatch.Load(); g != 0 && !errors.Is(err, memdev.ErrKilled) && byGoroutine(g) {
		d.m.growIO.Add(1)
		d.m.logf("grow code: %s %s at %d", what, d.Props().Path, off)
	}
	if err != nil {
		d.m.logf("%s %s at %d: %v", what, d.Props().Path, off, err)
	}
	return err
}

func (d loggedDev) ReadAt(p []byte, off int64) error {
	return d.note("read", off, d.Dev.ReadAt(p, off))
}
func (d loggedDev) WriteAt(p []byte, off int64) error {
	return d.note("write", off, d.Dev.WriteAt(p, off))
}
func (d loggedDev) WriteAtDurable(p []byte, off int64) error {
	return d.note("durable write", off, d.Dev.WriteAtDurable(p, off))
}
func (d loggedDev) Flush() error { return d.note("flush", 0, d.Dev.Flush()) }
func (d loggedDev) Discard(off, n int64) error {
	return d.note("discard", off, d.Dev.Discard(off, n))
}
func (d loggedDev) WriteZeroes(off, n int64) error {
	return d.note("write zeroes", off, d.Dev.WriteZeroes(off, n))
}

// goroutineIDs are the calling goroutine's id and its creator's (from
// its stack trace: the array writes to the members from goroutines of
// its own).
func goroutineIDs() (id, creator int64) {
	buf := make([]byte, 64<<10)
	st := string(buf[:runtime.Stack(buf, false)])
	fmt.Sscanf(st, "goroutine %d ", &id)
	if i := strings.LastIndex(st, " in goroutine "); i >= 0 {
		fmt.Sscanf(st[i:], " in goroutine %d", &creator)
	}
	return id, creator
}

// byGoroutine reports whether the caller is goroutine g or one g created.
func byGoroutine(g int64) bool {
	id, creator := goroutineIDs()
	return id == g || creator == g
}

func (m *arrayModel) logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	m.logMu.Lock()
	m.log = append(m.log, s)
	m.logMu.Unlock()
}

func (m *arrayModel) count(what string) {
	if m.cov != nil {
		m.cov.add(what)
	}
}

// start serves a as the daemon does: queues, not clean, background jobs.
func (m *arrayModel) start(a *Array) {
	m.a = a
	// The write-hole log's checkpoints come when the rings ask, not on a
	// timer (the model's runs then repeat).
	a.logCheckpointEvery = time.Hour
	a.paritySerialBuffers = m.tightBuffers
	a.Configure(func() { // the flusher runs already (a data race -race found in CI)
		a.MemberTimeout = *modelTimeout
		a.OnMemberFailed = func(role int, path string) { m.logf("array: role %d (%s) failed", role, path) }
		a.OnBitmapMemberError = func(role int, err error) { m.logf("array: bitmap write of role %d: %v", role, err) }
	})
	m.rings = nil
	for q := range modelQueues {
		r := &modelRing{m: m, id: q, served: make([]bool, modelDepth)}
		for range modelDepth + 2 {
			r.bufs = append(r.bufs, make([]byte, modelMaxIO))
		}
		for t := range modelDepth {
			r.bufIdx = append(r.bufIdx, t)
		}
		r.spares = []int{modelDepth, modelDepth + 1}
		for range modelDepth {
			r.poison = append(r.poison, make([]byte, modelMaxIO))
		}
		r.h = a.newQueue(r)
		m.rings = append(m.rings, r)
	}
	if err := m.blocking(func() error { return a.SetClean(false) }); err != nil {
		m.logf("SetClean(false): %v", err)
	}
	m.blocking(func() error { a.StartBackground(); return nil })
}

// blocking runs f off the test goroutine while serving the queues'
// wake-ups (a member swap waits for them), and fails the run if it does
// not end within the liveness bound.
func (m *arrayModel) blocking(f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	deadline := time.NewTimer(modelWaitMax)
	defer deadline.Stop()
	for {
		select {
		case err := <-done:
			m.serveWakes()
			return err
		case <-m.wake:
			m.serveWakes()
		case <-time.After(5 * time.Millisecond):
			// A swap polls the queues' epochs; serve a tick's worth.
			for _, r := range m.rings {
				r.h.syncFiles()
			}
		case <-deadline.C:
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			m.fail("liveness: a management call did not end within %v\n%s", modelWaitMax, buf)
		}
	}
}

func (m *arrayModel) serveWakes() {
	for _, r := range m.rings {
		if r.woken.Swap(false) {
			r.h.OnWake()
		}
	}
	m.reap()
}

func (m *arrayModel) cleanup() {
	if m.a != nil {
		a := m.a
		m.a = nil
		m.rack.Kill() // nothing more reaches the disks
		for _, d := range m.disks {
			m.rack.Release(m.rack.Disk(d))
		}
		// Operations still on the rings end, given up ones included: their
		// late-I/O records (keyed by the in-memory device) would otherwise
		// keep every sequence's disks alive (22 GB after about 50,000
		// sequences: the long run was killed for memory).
		for _, r := range m.rings {
			for len(r.pending) > 0 {
				op := r.pending[0]
				r.pending = r.pending[1:]
				r.h.OnCompletion(op.ud, -int32(unix.EIO))
			}
		}
		closeLater(a) // as reboot's: a killed process's Close waits out its member timeouts
	}
}

func (m *arrayModel) run(t *rapid.T) {
	m.count(fmt.Sprintf("level %d, %d members", m.level, m.n))
	steps := rapid.IntRange(1, modelMaxSteps).Draw(t, "steps")
	for range steps {
		m.lostBefore = m.noneActive()
		m.step(t)
		if m.over {
			return
		}
		if m.a != nil && m.noneActive() && !m.cutArmed {
			// The array failed: no in-sync copy is left. What it holds
			// is then nothing the model promises (see the report in the
			// commit: a given-up member write may still land later).
			m.logf("the array failed")
			m.count("array failed: run ends")
			return
		}
		m.reap()
		if m.a != nil {
			m.logf("  state %s", m.states())
			if n := m.a.ReadRepairs(); n != m.repairs {
				m.repairs = n
				m.count("read repair rewrote a range")
			}
		}
		if m.cutArmed && !m.rack.Armed() {
			m.cutArmed = false
			m.logf("the armed power cut happened")
			m.count("power cut mid-write happened")
			// (The array may have failed in the step before the cut: the
			// errors after it hide that, so either counts.)
			m.lost = m.lostBefore || m.noneActive()
			m.reboot(true)
			if m.over {
				return
			}
		}
	}
	if m.a == nil {
		return
	}
	m.quiesce()
	m.checkConvergence()
	m.readAll()
	// Every operation back: no device counts one out (Member.out, which
	// remove refuses a device by).
	m.unstall()
	for q, r := range m.rings {
		for len(r.pending) > 0 {
			m.deliverOne(q, 0)
		}
	}
	m.quiesce()
	for r := range m.a.Members {
		cur := m.a.currentMember(r)
		if cur.ringBusy() {
			m.fail("role %d counts member operations out, with none pending on any ring", r)
		}
		// A background job's or read repair's operation (Member.jobOut)
		// returns on its own goroutine, which a given-up one may still
		// be on: it must return, not be counted out for good.
		for deadline := time.Now().Add(10 * time.Second); cur != nil && cur.jobOut.Load() > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				m.fail("role %d counts a background job's member operation out that never returned", r)
				break
			}
		}
	}
}

func (m *arrayModel) step(t *rapid.T) {
	kind := rapid.SampledFrom([]string{
		"io", "io", "io", "io", "io", "deliver", "deliver", "deliver", "deliver", "deliver", "deliver",
		"tick", "quiesce", "fault", "stall", "stall", "hang", "release", "fail", "remove", "readd", "replace", "spare",
		"check", "waitsync", "del", "kill", "powercut", "cutlater", "grow",
	}).Draw(t, "step")
	switch kind {
	case "io":
		m.submit(t)
	case "deliver":
		m.deliver(t)
	case "tick":
		m.tick(rapid.SampledFrom([]time.Duration{time.Millisecond, *modelTimeout + time.Millisecond}).Draw(t, "tick"))
	case "quiesce":
		m.quiesce()
		m.checkConvergence()
	case "fault":
		d := m.rack.Disk(rapid.SampledFrom(m.disks).Draw(t, "disk"))
		switch rapid.IntRange(0, 2).Draw(t, "fault") {
		case 0:
			off := int64(rapid.IntRange(0, modelDisk/4096-1).Draw(t, "faultblock")) * 4096
			if m.a != nil && rapid.Bool().Draw(t, "fault in the window") {
				// Where the window's data lies (read repair's ground).
				off = int64(m.a.dataOffset) + int64(rapid.IntRange(0, 63).Draw(t, "window faultblock"))*4096
			}
			ops := memdev.Op(rapid.SampledFrom([]int{int(memdev.OpRead), int(memdev.OpWrite), int(memdev.OpWrite | memdev.OpRead | memdev.OpFlush)}).Draw(t, "faultops"))
			m.rack.SetFaults(d, memdev.Fault{Ops: ops, Off: off, Len: 4096 * 64, Err: unix.EIO})
			m.logf("fault: EIO on %v ops %d at %d", d.Path(), ops, off)
		case 1:
			m.rack.Unsupported(d)
			m.logf("fault: %s cannot discard nor write zeroes", d.Path())
		case 2:
			m.rack.SetFaults(d)
			m.logf("fault: %s healed", d.Path())
		}
	case "stall":
		// The disk's queue operations stall (the queues' clock gives
		// them up); its synchronous I/O still answers.
		p := rapid.SampledFrom(m.disks).Draw(t, "disk")
		m.hung[p] = true
		m.stallErr[p] = rapid.Bool().Draw(t, "stalled operations fail")
		m.logf("stall %s (failing: %v)", p, m.stallErr[p])
	case "hang":
		// Everything on the disk hangs: metadata and sync I/O wait for
		// the (wall-clock) member timeout.
		p := rapid.SampledFrom(m.disks).Draw(t, "disk")
		m.rack.Hang(m.rack.Disk(p))
		m.hung[p] = true
		m.devHung[p] = true
		m.stallErr[p] = rapid.Bool().Draw(t, "stalled operations fail")
		m.logf("hang %s (failing: %v)", p, m.stallErr[p])
	case "release":
		m.unstall()
		m.logf("release hangs")
	case "fail":
		r := rapid.IntRange(0, m.n-1).Draw(t, "role")
		path := m.pathOf(r)
		err := m.blocking(func() error { return m.a.Fail(r) })
		m.logf("fail %d (%s): %v", r, path, err)
		if err == nil {
			m.count("fail")
		}
		m.noteStale()
	case "remove":
		r := rapid.IntRange(0, m.n-1).Draw(t, "role")
		path := m.pathOf(r)
		err := m.blocking(func() error { return m.a.Remove(r) })
		m.logf("remove %d (%s): %v", r, path, err)
		if err == nil {
			m.count("remove")
			m.stale[path] = true
		}
	case "readd", "replace", "spare":
		// Not a hung disk: reading a new device's superblock has no
		// member timeout (see the report: the call, holding the spare
		// lock, would hang until the disk answers).
		var free []string
		for _, p := range m.freeDisks() {
			if !m.devHung[p] {
				free = append(free, p)
			}
		}
		if len(free) == 0 {
			return
		}
		p := rapid.SampledFrom(free).Draw(t, "disk")
		var err error
		switch kind {
		case "readd":
			err = m.blocking(func() error { return m.a.ReAdd(p) })
		case "replace":
			r := rapid.IntRange(0, m.n-1).Draw(t, "role")
			err = m.blocking(func() error { return m.a.ReplaceMember(r, p, true) })
		case "spare":
			err = m.blocking(func() error { return m.a.AddSpares([]string{p}, true) })
		}
		m.logf("%s %s: %v", kind, p, err)
		if err == nil {
			m.count(kind)
		}
		m.noteStale()
	case "check":
		repair := rapid.Bool().Draw(t, "repair")
		err := m.a.Check(repair)
		m.logf("check repair=%v: %v", repair, err)
		if err == nil {
			m.count("check")
		}
	case "waitsync":
		m.waitSync()
	case "grow":
		m.grow(t)
	case "del":
		m.del(t)
	case "kill":
		m.lost = m.noneActive()
		m.logf("kill -9")
		m.count("kill")
		m.rack.Kill()
		m.reboot(false)
	case "powercut":
		m.lost = m.noneActive()
		m.logf("power cut")
		m.count("power cut")
		m.rack.PowerCut()
		m.reboot(true)
	case "cutlater":
		if !m.cutArmed {
			n := rapid.IntRange(1, 30).Draw(t, "cutafter")
			m.rack.CutAfter(n)
			m.cutArmed = true
			m.logf("power cut armed after %d writes", n)
		}
	}
}

func (m *arrayModel) pathOf(r int) string {
	m.a.mu.Lock()
	defer m.a.mu.Unlock()
	if d := m.a.Members[r]; d != nil {
		return d.Path
	}
	return ""
}

// held reports the disks the array holds (roles and spares).
func (m *arrayModel) held() map[string]bool {
	h := map[string]bool{}
	m.a.mu.Lock()
	for _, d := range m.a.Members {
		if d != nil {
			h[d.Path] = true
		}
	}
	for _, s := range m.a.spares {
		h[s.m.Path] = true
	}
	m.a.mu.Unlock()
	return h
}

func (m *arrayModel) freeDisks() []string {
	h := m.held()
	var free []string
	for _, p := range m.disks {
		if !h[p] {
			free = append(free, p)
		}
	}
	// faulty members are held but may be re-added
	st := m.a.Engine.State()
	for r, ms := range st.Members {
		if ms.State == engine.MemberFaulty {
			if p := m.pathOf(r); p != "" {
				free = append(free, p)
			}
		}
	}
	return free
}

// noteStale records the disks of roles that are not in sync.
func (m *arrayModel) noteStale() {
	st := m.a.Engine.State()
	for r, ms := range st.Members {
		if ms.State != engine.MemberActive {
			if p := m.pathOf(r); p != "" {
				m.stale[p] = true
			}
		}
	}
}

// submit starts a user request on a free tag of a queue.
func (m *arrayModel) submit(t *rapid.T) {
	q := rapid.IntRange(0, modelQueues-1).Draw(t, "queue")
	r := m.rings[q]
	tag := -1
	for i, busy := range r.served {
		if !busy {
			tag = i
			break
		}
	}
	if tag < 0 {
		return
	}
	ops := []uint8{ublk.IOOpRead, ublk.IOOpRead, ublk.IOOpWrite, ublk.IOOpWrite, ublk.IOOpWrite,
		ublk.IOOpFlush, ublk.IOOpDiscard, ublk.IOOpWriteZeroes}
	if m.parity() {
		ops = ops[:6] // not served there (EOPNOTSUPP, and not advertised)
	}
	op := rapid.SampledFrom(ops).Draw(t, "op")
	sectors := uint32(rapid.IntRange(1, modelMaxIO>>9).Draw(t, "sectors"))
	sector := uint64(rapid.IntRange(0, modelWindow-int(sectors)).Draw(t, "sector"))
	if rapid.IntRange(0, 3).Draw(t, "high") == 0 {
		// The high window: the old end, and the grown space once there.
		sector = uint64(rapid.IntRange(modelWindow, modelWindow+modelHigh-int(sectors)).Draw(t, "high sector"))
		if m.arr(sector+uint64(sectors)) > m.size() {
			return
		}
	}
	req := &modelReq{q: q, tag: uint16(tag), op: op, sector: sector, sectors: sectors}
	if op == ublk.IOOpFlush {
		req.sector, req.sectors = 0, 0
	}
	if op == ublk.IOOpWrite || op == ublk.IOOpDiscard || op == ublk.IOOpWriteZeroes {
		// No two writes of one sector in flight at once (the reference
		// orders them by start).
		for s := sector; s < sector+uint64(sectors); s++ {
			if m.ref[s].wr != 0 {
				return
			}
		}
	}
	m.seq++
	req.seq = m.seq
	buf := r.bufs[r.bufIdx[tag]]
	switch op {
	case ublk.IOOpWrite:
		req.fua = rapid.Bool().Draw(t, "fua")
		m.ids++
		req.id = m.ids
		for i := range sectors {
			fillSector(buf[i<<9:(i+1)<<9], req.id, m.arr(sector+uint64(i)))
		}
	case ublk.IOOpFlush:
		req.snap = make([]map[uint64]bool, len(m.ref))
		for s := range m.ref {
			// A write in flight is not covered by the flush but may land.
			req.snap[s] = maps.Clone(m.ref[s].cur)
			if w := m.ref[s].wr; w != 0 {
				req.snap[s][w-1] = true
			}
		}
	case ublk.IOOpRead:
		clear(buf[:sectors<<9])
		// What the sectors may read as the read starts (a write in
		// flight then may be read before or after it lands).
		req.snap = make([]map[uint64]bool, sectors)
		req.crash = make([]map[uint64]bool, sectors)
		for i := range uint64(sectors) {
			ref := &m.ref[sector+i]
			req.snap[i] = maps.Clone(ref.cur)
			req.crash[i] = maps.Clone(ref.crash)
			if ref.wr != 0 {
				req.snap[i][ref.wr-1] = true
				req.snap[i][^uint64(0)] = true // a write was in flight
			}
		}
	}
	if op == ublk.IOOpWrite || op == ublk.IOOpWriteZeroes || op == ublk.IOOpDiscard {
		for s := sector; s < sector+uint64(sectors); s++ {
			ref := &m.ref[s]
			ref.lastSeq = m.seq
			ref.wr, ref.wrSeq = req.id+1, m.seq
			ref.dur = append(ref.dur, durVal{req.id, m.seq})
			if op == ublk.IOOpDiscard {
				ref.unknown = true
			}
		}
	}
	r.served[tag] = true
	m.reqs[[2]int{q, tag}] = req
	var flags uint32
	if req.fua {
		flags = ublk.IOFlagFUA
	}
	m.count(fmt.Sprintf("submit op %d fua %v", op, req.fua))
	m.logf("submit q%d t%d op %d id %d %d+%d fua %v seq %d", q, tag, op, req.id, req.sector, req.sectors, req.fua, req.seq)
	r.h.Handle(&ublk.Request{Tag: uint16(tag), Op: op, Flags: flags, Sector: m.arr(req.sector), Sectors: req.sectors, Buf: r.reqBuf(tag)})
}

// fillSector fills b with write id's data for array sector s (id 0:
// zeroes).
func fillSector(b []byte, id, s uint64) {
	if id == 0 {
		clear(b)
		return
	}
	for i := 0; i < len(b); i += 16 {
		binary.LittleEndian.PutUint64(b[i:], id)
		binary.LittleEndian.PutUint64(b[i+8:], s)
	}
}

// sectorID is the write id whose data b holds for sector s (false: no
// write's).
func sectorID(b []byte, s uint64) (uint64, bool) {
	id := binary.LittleEndian.Uint64(b)
	want := make([]byte, len(b))
	fillSector(want, id, s)
	return id, bytes.Equal(b, want)
}

// deliver completes one pending member operation, drawn among all queues'.
func (m *arrayModel) deliver(t *rapid.T) {
	type cand struct{ q, i int }
	var cs []cand
	for q, r := range m.rings {
		for i, op := range r.pending {
			if !m.hung[op.m.Path] {
				cs = append(cs, cand{q, i})
			}
		}
	}
	if len(cs) == 0 {
		m.serveWakes()
		return
	}
	c := cs[rapid.IntRange(0, len(cs)-1).Draw(t, "deliver")]
	m.deliverOne(c.q, c.i)
}

func (m *arrayModel) deliverOne(q, i int) {
	r := m.rings[q]
	op := r.pending[i]
	r.pending = append(r.pending[:i], r.pending[i+1:]...)
	dev, ok := op.m.Device.(loggedDev)
	if !ok {
		m.t.Fatalf("member %s is not a memdev", op.m.Path)
	}
	n := int64(op.io.Sectors) << 9
	var err error
	switch {
	case op.fail:
		err = unix.EIO
		m.count("stalled operation answered with an error")
	case op.io.Kind == engine.IORead:
		err = dev.ReadAt(op.data[:n], int64(op.off))
	default:
		err = m.deliverWrite(dev, op, n)
	}
	res := int32(0)
	if op.io.Kind == engine.IORead || op.io.Kind == engine.IOWrite {
		res = int32(n)
	}
	if err != nil {
		m.logf("member op %v on %s at %d: %v", op.io.Kind, op.m.Path, op.off, err)
		if op.io.Kind == engine.IORead {
			// A read that failed leaves its buffer undefined (a device
			// may have transferred part of it, or garbage).
			for i := range op.data[:n] {
				op.data[i] = 0xa5
			}
		}
		var errno unix.Errno
		if errors.As(err, &errno) {
			res = -int32(errno)
		} else {
			res = -int32(unix.EIO)
		}
	}
	m.logf("deliver %v on %s at %d: res %d", op.io, op.m.Path, op.off, res)
	r.h.OnCompletion(op.ud, res)
	m.serveWakes()
}

// deliverWrite carries out a member operation other than a read.
func (m *arrayModel) deliverWrite(dev loggedDev, op ringOp, n int64) error {
	switch op.io.Kind {
	case engine.IOWrite:
		if op.io.FUA {
			return dev.WriteAtDurable(op.data[:n], int64(op.off))
		}
		return dev.WriteAt(op.data[:n], int64(op.off))
	case engine.IOFlush:
		return dev.Flush()
	case engine.IODiscard:
		return dev.Discard(int64(op.off), n)
	case engine.IOWriteZeroes:
		return dev.WriteZeroes(int64(op.off), n)
	}
	return nil
}

// unstall makes stalled and hung disks answer: the queue operations out
// on a disk whose stall ends in errors (stallErr) fail when delivered.
func (m *arrayModel) unstall() {
	for _, r := range m.rings {
		for i := range r.pending {
			if p := r.pending[i].m.Path; m.hung[p] && m.stallErr[p] {
				r.pending[i].fail = true
			}
		}
	}
	for p := range m.hung {
		m.rack.Release(m.rack.Disk(p))
	}
	clear(m.hung)
	clear(m.devHung)
	clear(m.stallErr)
}

// tick passes d on the queues' clock and ticks them.
func (m *arrayModel) tick(d time.Duration) {
	m.now = m.now.Add(d)
	for _, r := range m.rings {
		r.h.OnTick()
	}
	m.reap()
}

// reap takes the completed requests and checks them against the
// reference.
func (m *arrayModel) reap() {
	for _, r := range m.rings {
		done := r.done
		r.done = nil
		for _, d := range done {
			if m.zeroCopy && r.outOn(d.tag) {
				// Committed, but a member operation on its pages is
				// out: the kernel holds the request until it returns.
				r.done = append(r.done, d)
				m.count("zero copy: completion waits for a given-up operation")
				continue
			}
			req := m.reqs[[2]int{r.id, int(d.tag)}]
			if req == nil {
				m.t.Fatalf("queue %d tag %d completed but not in flight", r.id, d.tag)
			}
			delete(m.reqs, [2]int{r.id, int(d.tag)})
			r.served[d.tag] = false
			m.completed(req, r.bufs[r.bufIdx[d.tag]], d.err)
		}
	}
}

// outOn reports whether a member operation of request tag is pending.
func (r *modelRing) outOn(tag uint16) bool {
	for _, op := range r.pending {
		if uint16(op.ud>>32) == tag {
			return true
		}
	}
	return false
}

func (m *arrayModel) completed(req *modelReq, buf []byte, err error) {
	m.logf("done q%d t%d op %d id %d %d+%d: %v", req.q, req.tag, req.op, req.id, req.sector, req.sectors, err)
	m.count(fmt.Sprintf("complete op %d err %v", req.op, err != nil))
	if errors.Is(err, errBitmapWrite) {
		m.count("write failed unissued: the last copy failed its bitmap batch")
	}
	switch req.op {
	case ublk.IOOpRead:
		if err != nil {
			m.logf("read %d+%d: %v", req.sector, req.sectors, err)
			return
		}
		for i := range uint64(req.sectors) {
			s := req.sector + i
			ref := &m.ref[s]
			if ref.unknown {
				continue
			}
			id, ok := sectorID(buf[i<<9:(i+1)<<9], m.arr(s))
			garbage := false
			hole := m.writeHole(ref, req, i)
			if !ok {
				if hole && !m.leftovers(s) {
					m.count("write hole: a read after a crash returned data of no write")
				} else if !m.leftovers(s) {
					m.fail("read of sector %d returned data of no write (%x...)", s, buf[i<<9:i<<9+16])
				}
				// What the devices held: allowed where id 0 is, and,
				// never written, it does not pin the sector.
				id, garbage = 0, true
			}
			allowed := ref.cur[id] || (ref.wr != 0 && ref.wr-1 == id)
			// A write since the read started: the answer may be from
			// before it, and does not pin the sector.
			changed := ref.wr != 0 || ref.lastSeq > req.seq
			if req.snap != nil {
				allowed = allowed || req.snap[i][id]
				changed = changed || req.snap[i][^uint64(0)]
			}
			for _, d := range ref.dur {
				if d.seq > req.seq {
					allowed = allowed || d.id == id
					changed = true
				}
			}
			if !allowed && (ref.crash[id] || req.crash != nil && req.crash[i][id]) && (m.copyLost || m.copyLostSinceCrash()) {
				// The chosen copy of a range awaiting resync failed: the
				// answer is now another copy's (see sectorRef.crash).
				m.count("read changed after a crash and a lost copy")
				allowed = true
			}
			if !allowed && hole {
				m.count("write hole: a read after a crash returned another write")
				allowed, garbage = true, true
			}
			if !allowed {
				var snap map[uint64]bool
				if req.snap != nil {
					snap = req.snap[i]
				}
				m.fail("durability: read %d+%d (seq %d) of sector %d returned write %d, not one of %v (after a power cut: %v; at the read's start %v)", req.sector, req.sectors, req.seq, s, id, slices.Sorted(maps.Keys(ref.cur)), ref.dur, snap)
			}
			if !changed && !garbage {
				ref.cur = map[uint64]bool{id: true} // stability: it reads this from now on
			}
		}
	case ublk.IOOpFlush:
		if err != nil {
			m.logf("flush: %v", err)
			return
		}
		if req.seq < m.flushed {
			// A newer flush completed first and narrowed more: this one's
			// rule (rebuilt from seqs the newer one's dropped) adds
			// nothing, and applied now it would drop writes made between
			// the two.
			break
		}
		m.flushed = req.seq
		for s := range m.ref {
			ref := &m.ref[s]
			var dur []durVal
			for id := range req.snap[s] {
				dur = append(dur, durVal{id, 0})
			}
			for _, d := range ref.dur {
				if d.seq > req.seq {
					dur = append(dur, d)
				}
			}
			ref.dur = dur
		}
	case ublk.IOOpWrite, ublk.IOOpDiscard, ublk.IOOpWriteZeroes:
		if err != nil {
			m.logf("write op %d %d+%d: %v (state %s)", req.op, req.sector, req.sectors, err, m.states())
		}
		if err != nil && m.parity() && errors.Is(err, engine.ErrLastCopy) && !errors.Is(err, engine.ErrStripeUnhealed) {
			m.count("raid5/6 write failed on the last copy: its stripes healed")
		}
		if err != nil && m.parity() && errors.Is(err, engine.ErrStripeUnhealed) && m.a != nil {
			// A raid5/6 write that failed on a member kept as the last
			// copy, whose stripes the log could not heal (a heal's write
			// failed too, say: engine/raid56_heal.go), leaves their
			// parity not matching their data, and nothing records it (no
			// bad-block list): a lost chunk rebuilt there may read as
			// anything until written again. A healed one is checked as
			// strictly as any failed write.
			m.count("raid5/6 write failed on the last copy: its stripes unknown")
			g := m.a.Engine.Parity
			per := g.ChunkSectors * uint64(g.DataMembers())
			first := req.sector / per * per
			last := min((req.sector+uint64(req.sectors)+per-1)/per*per, uint64(len(m.ref)))
			for s := first; s < last; s++ {
				m.ref[s].unknown = true
			}
		}
		for s := req.sector; s < req.sector+uint64(req.sectors); s++ {
			ref := &m.ref[s]
			ref.wr = 0
			if req.op == ublk.IOOpDiscard {
				// Unknown until the next write; zeroes (memdev's discard)
				// stay possible after a power cut that loses that write.
				ref.cur[0] = true
				continue
			}
			if err != nil {
				ref.cur[req.id] = true
				if req.op == ublk.IOOpWriteZeroes {
					ref.unknown = true // the kernel would write zeroes instead
				}
				continue
			}
			ref.cur = map[uint64]bool{req.id: true}
			// (A read that started before this write may still answer
			// a crash value: it kept its own copy.)
			ref.crash = nil
			ref.unknown = false
			if req.fua {
				ref.dur = []durVal{{req.id, req.seq}}
			}
		}
	}
}

// writeHole reports whether the read req's i-th sector (reference ref)
// may read as anything: after an assembly forced over a dirty degraded
// raid5/6 array (the operator's choice, as mdadm --force: members it was
// told were failed may come back with stale data); and with -array.hole
// as raid5/6 without the write-hole log (docs/raid56.md), which have the
// write hole: a stripe a crash tore while a
// write was in flight, reconstructed from its parity before a resync
// rewrote the parity, gives data of no write, also for sectors no write
// touched. That takes a member lost since the crash (in sync at the
// assembly after it: copyLostSinceCrash, copyLost before), or an array
// assembled dirty and degraded with force.
func (m *arrayModel) writeHole(ref *sectorRef, req *modelReq, i uint64) bool {
	if !m.parity() {
		return false
	}
	crash := ref.crash != nil || req.crash != nil && req.crash[i] != nil
	if !*modelHole {
		// With the log, only a forced assembly (the operator's choice,
		// as mdadm --force: members it was told were failed may come
		// back with their stale data) leaves what a crash left open.
		return crash && m.forcedDirty
	}
	return crash && (m.copyLost || m.forcedDirty || m.copyLostSinceCrash())
}

func (m *arrayModel) fail(format string, args ...any) {
	m.logMu.Lock()
	log := strings.Join(m.log, "\n  ")
	m.logMu.Unlock()
	m.t.Fatalf(format+"\nlog:\n  %s", append(args, log)...)
}

// quiesce completes every request: delivers every deliverable member
// operation, ticks hung ones past the timeout, waits for bitmap and
// barrier wake-ups.
func (m *arrayModel) quiesce() {
	deadline := time.Now().Add(modelWaitMax)
	stuck := 0
	for len(m.reqs) > 0 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			m.fail("liveness: %d requests did not complete\n%s", len(m.reqs), buf)
		}
		delivered := false
		for q, r := range m.rings {
			for i, op := range r.pending {
				if !m.hung[op.m.Path] {
					m.deliverOne(q, i)
					delivered = true
					break
				}
			}
			if delivered {
				break
			}
		}
		if delivered {
			continue
		}
		m.serveWakes()
		if len(m.reqs) == 0 {
			break
		}
		hungOps, ready := false, false
		for _, r := range m.rings {
			for _, op := range r.pending {
				if m.hung[op.m.Path] {
					hungOps = true
				} else {
					ready = true
				}
			}
		}
		if ready {
			continue
		}
		if hungOps {
			n := len(m.reqs)
			m.tick(*modelTimeout + time.Millisecond)
			if len(m.reqs) == n {
				if stuck++; stuck > 2 {
					// A read is given up only with a spare buffer; with
					// every spare held by given-up reads still out, the
					// rest wait for their member (by design): it answers.
					m.logf("hung members answer: no spare buffer left to give reads up")
					m.count("hangs released for spare buffers")
					m.unstall()
				}
			}
			continue
		}
		select {
		case <-m.wake:
		case <-time.After(5 * time.Millisecond):
			m.tick(time.Millisecond) // a queue's tick: parked writes retried
		}
	}
}

// waitSync waits for the background job (serving the queues meanwhile).
func (m *arrayModel) waitSync() {
	// A rebuild waits for given-up operations on its target to return
	// (late I/O): hung members answer now.
	m.unstall()
	for q, r := range m.rings {
		for len(r.pending) > 0 {
			m.deliverOne(q, 0)
		}
	}
	m.quiesce()
	m.blocking(func() error { m.a.WaitSync(); return nil })
	s := m.a.SyncStatus()
	m.logf("job ended: %s %s", s.LastAction, s.LastResult)
	if s.LastAction != "" {
		m.count("job " + s.LastAction + " " + s.LastResult)
	}
	// rebuilt members are current again
	st := m.a.Engine.State()
	for r, ms := range st.Members {
		if ms.State == engine.MemberActive {
			delete(m.stale, m.pathOf(r))
		}
	}
	m.checkConvergence()
}

// checkConvergence: with no request in flight, no job running and none
// needed, the in-sync copies agree over the window.
func (m *arrayModel) checkConvergence() {
	if len(m.reqs) > 0 || m.a.sync.busy() || m.a.needsResync() || (m.cutArmed && !m.rack.Armed()) {
		return // (a power cut happened: the reboot comes after this step)
	}
	st := m.a.Engine.State()
	g := m.a.Engine.Geo
	paths := make([]string, len(st.Members))
	late := make([]bool, len(st.Members))
	for r := range st.Members {
		paths[r] = m.pathOf(r)
		m.a.mu.Lock()
		if d := m.a.Members[r]; d != nil {
			late[r] = d.lateWrites.Load() > 0
		}
		m.a.mu.Unlock()
	}
	var locs [engine.MaxCopies]engine.Location
	differ := ""
	rs := m.a.Bitmap.Geometry().RegionSectors
	if m.parity() {
		differ = m.parityConvergence(st, paths, late)
	}
	for s := range uint64(len(m.ref)) {
		if m.parity() {
			break
		}
		if m.ref[s].unknown || m.arr(s) >= g.ArraySectors() {
			continue
		}
		if m.leftovers(s) && !m.a.Bitmap.Written(int(m.arr(s)/rs)) {
			continue // never written: the copies hold what the devices held
		}
		var first []byte
		var who string
		for _, l := range g.Locate(m.arr(s), locs[:0]) {
			if st.Members[l.Member].State != engine.MemberActive || late[l.Member] || paths[l.Member] == "" {
				// (A given-up write still out: nothing reads it. No path: a
				// spare is taking the role on another goroutine, after the
				// state was read.)
				continue
			}
			b := m.rack.Current(m.rack.Disk(paths[l.Member]), int64(m.a.dataOffset+l.Sector<<9), 512)
			if first == nil {
				first, who = b, paths[l.Member]
			} else if !bytes.Equal(first, b) && differ == "" {
				differ = fmt.Sprintf("convergence: array sector %d differs between %s and %s (in sync, no job needed)", m.arr(s), who, paths[l.Member])
			}
		}
	}
	if m.cutArmed && !m.rack.Armed() {
		// The armed cut came during the loop, from a write of the
		// flusher or a job (their goroutines are not the model's): it
		// dropped caches under it, and the reboot comes after this step.
		return
	}
	if differ != "" {
		m.fail("%s", differ)
	}
	m.count("convergence checked")
}

// parityConvergence is checkConvergence's for raid5/6: over every stripe
// the window touches whose members are all in sync, P (and Q) are the
// parity of the data chunks (but where never-written regions hold what
// the devices held).
func (m *arrayModel) parityConvergence(st *engine.ArrayState, paths []string, late []bool) string {
	for r, ms := range st.Members {
		if ms.State != engine.MemberActive || late[r] || paths[r] == "" {
			return ""
		}
	}
	g := *m.a.Engine.Parity
	par, err := engine.NewParity(g.DataMembers(), g.Level == engine.Level6)
	if err != nil {
		m.fail("parity: %v", err)
	}
	per := g.ChunkSectors * uint64(g.DataMembers())
	cb := int64(g.ChunkSectors << 9)
	seen := map[uint64]bool{}
	for i := range uint64(len(m.ref)) {
		a := m.arr(i)
		if a >= g.ArraySectors() || seen[a/per] {
			continue
		}
		stripe := a / per
		seen[stripe] = true
		if m.garbage || (stripe+1)*per > m.e0 {
			first, last := m.a.Bitmap.Regions(stripe*per, per)
			written := true
			for r := first; r <= last; r++ {
				written = written && m.a.Bitmap.Written(r)
			}
			if !written {
				continue // never written: what the devices held
			}
		}
		sm := g.Stripe(stripe)
		data := make([][]byte, g.DataMembers())
		for mem := range g.Members {
			if sl := sm.Slot[mem]; sl >= 0 {
				data[sl] = m.rack.Current(m.rack.Disk(paths[mem]), int64(m.a.dataOffset)+int64(stripe)*cb, int(cb))
			}
		}
		parity := [][]byte{make([]byte, cb)}
		if g.Level == engine.Level6 {
			parity = append(parity, make([]byte, cb))
		}
		if err := par.Compute(data, parity); err != nil {
			m.fail("parity: %v", err)
		}
		for k, pm := range []int{sm.P, sm.Q}[:len(parity)] {
			got := m.rack.Current(m.rack.Disk(paths[pm]), int64(m.a.dataOffset)+int64(stripe)*cb, int(cb))
			if !bytes.Equal(got, parity[k]) {
				return fmt.Sprintf("convergence: stripe %d's %c on %s is not the parity of its data (in sync, no job needed)", stripe, "PQ"[k], paths[pm])
			}
		}
	}
	return ""
}

// readAll reads the whole window back through a queue.
func (m *arrayModel) readAll() {
	r := m.rings[0]
	for s := uint64(0); s < uint64(len(m.ref)); s += modelMaxIO >> 9 {
		if m.arr(s+modelMaxIO>>9) > m.size() {
			continue
		}
		req := &modelReq{q: 0, tag: 0, op: ublk.IOOpRead, sector: s, sectors: modelMaxIO >> 9}
		m.seq++
		req.seq = m.seq
		r.served[0] = true
		m.reqs[[2]int{0, 0}] = req
		clear(r.bufs[r.bufIdx[0]])
		r.h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: m.arr(s), Sectors: req.sectors, Buf: r.reqBuf(0)})
		m.quiesce()
	}
}

// del stops the array as the daemon's del does, and assembles it again
// from some of its disks, in some order.
func (m *arrayModel) del(t *rapid.T) { m.stopAssemble(t, false) }

// stopAssemble stops the array as del does and assembles it again (all:
// from every disk).
func (m *arrayModel) stopAssemble(t *rapid.T, all bool) {
	m.quiesce()
	a := m.a
	err := m.blocking(func() error {
		a.StopSync()
		return a.SetClean(true)
	})
	m.logf("del: %v (state %s)", err, m.states())
	m.count("del")
	m.markStale()
	// Known only if the disks record the state the stop left: a member
	// failed during the clean stop itself (its bitmap clear failing, say)
	// is failed in memory only, and no write skipped it.
	m.staleKnown = err == nil && a.durable.Load() >= a.Engine.State().Gen
	m.lost = m.noneActive()
	a.Close()
	m.a = nil
	// Assembly reads every superblock without a member timeout: hung
	// disks come back first.
	for p := range m.devHung {
		m.rack.Release(m.rack.Disk(p))
	}
	clear(m.hung)
	clear(m.devHung)
	m.assemble(t, all)
}

// reboot: the process ended (kill -9 or power cut); a new one assembles
// the array. Requests in flight count as failed.
func (m *arrayModel) reboot(power bool) {
	m.copyLost = m.copyLost || m.copyLostSinceCrash()
	old := m.a
	m.a = nil
	m.rack.CutAfter(0)
	// Devices the dead array opened after an armed cut belong to the
	// next process: end it too (the caches stay).
	m.rack.Kill()
	m.cutArmed = false
	for k, req := range m.reqs {
		delete(m.reqs, k)
		m.completed(req, nil, errors.New("process ended"))
	}
	for p := range m.hung {
		m.rack.Release(m.rack.Disk(p))
	}
	clear(m.hung)
	clear(m.devHung)
	// The dead process's queues: their member operations fail (nothing
	// reaches the disks any more), so its requests end; then its
	// goroutines are stopped off this one (a killed process runs no
	// Close: it must not hold the model up).
	for _, r := range m.rings {
		for len(r.pending) > 0 {
			op := r.pending[0]
			r.pending = r.pending[1:]
			r.h.OnCompletion(op.ud, -int32(unix.EIO))
		}
		r.done = nil
	}
	if old != nil { // (nil: a cut ended a grow's re-assembly)
		closeLater(old)
	}
	m.staleKnown = false
	if power {
		for s := range m.ref {
			ref := &m.ref[s]
			ref.cur = map[uint64]bool{}
			for _, d := range ref.dur {
				ref.cur[d.id] = true
			}
		}
	}
	for s := range m.ref {
		// Still unwritten since an earlier crash: its answers then stay
		// possible (a copy lost meanwhile may have changed them).
		ref := &m.ref[s]
		if ref.crash == nil {
			ref.crash = map[uint64]bool{}
		}
		maps.Copy(ref.crash, ref.cur)
	}
	m.assemble(m.t, true)
	m.inSyncAtCrash = nil
	if m.a != nil {
		m.inSyncAtCrash = m.inSync()
	}
}

// growDisk grows disk p in place to size bytes; the added space holds
// the disk's own leftovers.
func (m *arrayModel) growDisk(p string, size int64) {
	if size <= m.diskSize[p] {
		return
	}
	i := slices.Index(m.disks, p)
	m.rack.Grow(m.rack.Disk(p), size, func(off int64, b []byte) {
		for j := range b {
			o := off + int64(j)
			b[j] = byte(i*37+101) ^ byte(o>>9) ^ byte(o*7)
		}
	})
	m.diskSize[p] = size
	m.logf("disk %s grown to %d bytes", p, size)
}

// grow: disks grown in place (the members, one disk, which replace or
// spare may bring in later, or every disk past what the bitmap area
// holds at its region size), then the daemon's grow: GrowCheck on the
// serving array (a refusal does no I/O: raid10 far layouts are always
// refused), the hand-over (requests complete, the array
// closed without a clean stop), assembly again, Grow (a power cut may
// be armed in it) and the array served again. The bitmap of the
// re-assembled array must keep its regions' states through Grow,
// merged when the region size doubles.
func (m *arrayModel) grow(t *rapid.T) {
	switch rapid.IntRange(0, 3).Draw(t, "grow disks") {
	case 1:
		add := int64(rapid.IntRange(1, 2).Draw(t, "grow MiB")) << 20
		for p := range m.held() {
			m.growDisk(p, m.diskSize[p]+add)
		}
	case 2:
		p := rapid.SampledFrom(m.disks).Draw(t, "disk")
		m.growDisk(p, m.diskSize[p]+1<<20)
	case 3:
		for _, p := range m.disks {
			m.growDisk(p, max(m.diskSize[p], modelBigDisk))
		}
	}
	if rapid.IntRange(0, 3).Draw(t, "restart before grow") == 0 {
		// Stopped and started again (or idle long enough for the
		// bitmap to clear its regions): clean regions go into the grow.
		m.stopAssemble(t, true)
		if m.over || m.a == nil || (m.cutArmed && !m.rack.Armed()) {
			return
		}
	}
	if rapid.Bool().Draw(t, "wait before grow") {
		m.waitSync()
	}
	g := m.a.Engine.Geo
	memberSectors := m.a.Engine.MemberSectors()
	want := uint64(0) // max
	switch rapid.IntRange(0, 3).Draw(t, "grow size") {
	case 1:
		want = memberSectors + 2048
	case 2:
		want = memberSectors - 8 // a shrink: refused
	}
	m.quiesce()
	m.growIO.Store(0)
	id, _ := goroutineIDs()
	m.growWatch.Store(id)
	p, err := m.a.GrowCheck(want, true)
	far := g.Level == engine.Level10 && g.Layout.Far > 1 && !g.Layout.Offset
	if far && err == nil {
		m.fail("grow of raid%d %s: GrowCheck passed (%+v)", m.level, g.Layout, p)
	}
	if far {
		// Grow itself refuses too, before any I/O.
		if _, gerr := m.a.Grow(want); gerr == nil {
			m.fail("grow of raid%d %s: Grow passed", m.level, g.Layout)
		}
	}
	m.growWatch.Store(0)
	if n := m.growIO.Load(); n != 0 {
		// GrowCheck reads and writes nothing; a refused Grow neither.
		m.fail("GrowCheck (and Grow, refused) did %d device operations: %v", n, err)
	}
	if err != nil {
		m.logf("grow to %d sectors per member: refused: %v", want, err)
		switch {
		case errors.Is(err, ErrGrowNoChange):
			m.count("grow: no change")
		case far:
			m.count("grow: refused (raid10 far)")
		default:
			why := err.Error()
			if i := strings.IndexAny(why, ":;("); i > 0 {
				why = why[:i]
			}
			if strings.HasPrefix(why, "role ") || strings.HasPrefix(why, "spare ") || strings.HasPrefix(why, "/m") {
				why = why[:strings.IndexByte(why, ' ')+1] + "..."
			}
			m.count("grow: refused: " + why)
		}
		return
	}
	m.logf("grow: %+v", p)
	// The hand-over, as the daemon's: the device lets go of its requests
	// (here they complete first), the array closes without a clean stop
	// and is assembled again from its disks.
	var disks []string
	for _, d := range m.disks {
		if m.held()[d] {
			disks = append(disks, d)
		}
	}
	a := m.a
	m.blocking(func() error { a.StopSync(); a.Close(); return nil })
	m.a = nil
	m.count("grow: hand-over")
	for d := range m.devHung {
		m.rack.Release(m.rack.Disk(d))
	}
	clear(m.hung)
	clear(m.devHung)
	// As assemble: faults are healed (a member whose superblock cannot be
	// read makes the assembly fail, and the daemon retries it).
	for _, d := range disks {
		m.rack.SetFaults(m.rack.Disk(d))
	}
	m.staleKnown = false
	// As after a kill: the copies of a range awaiting resync may differ
	// (see sectorRef.crash).
	m.copyLost = m.copyLost || m.copyLostSinceCrash()
	for s := range m.ref {
		ref := &m.ref[s]
		if ref.crash == nil {
			ref.crash = map[uint64]bool{}
		}
		maps.Copy(ref.crash, ref.cur)
	}
	m.inSyncAtCrash = nil
	if rapid.IntRange(0, 2).Draw(t, "cut in grow") == 0 && !m.cutArmed {
		n := rapid.IntRange(1, 4*m.n).Draw(t, "grow cutafter")
		m.rack.CutAfter(n)
		m.cutArmed = true
		m.logf("power cut armed after %d writes", n)
	}
	na, err := Open(disks, m.spec(), false)
	m.logf("assemble %v for grow: %v", disks, err)
	if err != nil {
		if m.cutArmed && !m.rack.Armed() {
			return // the reboot follows the step
		}
		m.fail("availability: assembly for grow of %v failed: %v\n  superblocks: %s", disks, err, m.superblocks(disks))
	}
	if got := na.Engine.ArraySectors(); got < m.grownTo {
		m.fail("availability: the array was grown to %d sectors, assembled for grow at %d", m.grownTo, got)
	}
	old := na.Bitmap.Geometry()
	written := make([]bool, old.Regions)
	dirty := make([]bool, old.Regions)
	for r := range old.Regions {
		written[r], dirty[r] = na.Bitmap.Written(r), na.Bitmap.Dirty(r)
	}
	gp, err := na.Grow(p.NewMemberSectors)
	m.logf("grow to %d sectors per member: %v", p.NewMemberSectors, err)
	cut := m.cutArmed && !m.rack.Armed()
	switch {
	case err == nil:
		m.count("grow: grown")
		m.grownTo = gp.NewArraySectors
		if got := na.Engine.ArraySectors(); got != gp.NewArraySectors || na.Bitmap.Geometry().ArraySectors != got {
			m.fail("grown array: %d sectors, its bitmap %d; the plan %+v", got, na.Bitmap.Geometry().ArraySectors, gp)
		}
		m.checkGrownBitmap(na, old, written, dirty)
	case cut:
		m.count("grow: cut")
	default:
		m.count("grow: failed after the hand-over")
	}
	m.start(na)
	m.markStale()
	if !cut {
		m.inSyncAtCrash = m.inSync()
	}
}

// checkGrownBitmap: every region of a's grown bitmap is written if one of
// the old regions it holds was, and dirty where one of them was dirty, or
// where written data and never-written space (a never-written old region,
// space the grow added) share it.
func (m *arrayModel) checkGrownBitmap(a *Array, old bitmap.Geometry, written, dirty []bool) {
	ng := a.Bitmap.Geometry()
	if ng.RegionSectors != old.RegionSectors {
		m.count("grow: bitmap region size doubled")
	}
	k := int(ng.RegionSectors / old.RegionSectors)
	for r := range ng.Regions {
		anyWritten, anyDirty, anyNever := false, false, uint64(r+1)*ng.RegionSectors > old.ArraySectors
		for o := r * k; o < (r+1)*k && o < old.Regions; o++ {
			anyWritten = anyWritten || written[o]
			anyDirty = anyDirty || dirty[o]
			anyNever = anyNever || !written[o]
		}
		if anyWritten && anyNever {
			m.count("grow: a written region takes never-written space")
			if !anyDirty {
				m.count("grow: a clean written region takes never-written space")
			}
		}
		if a.Bitmap.Written(r) != anyWritten {
			m.fail("grown bitmap: region %d (of %d sectors) written %v; its old regions (of %d sectors) %v", r, ng.RegionSectors, a.Bitmap.Written(r), old.RegionSectors, written[r*k:min((r+1)*k, old.Regions)])
		}
		if anyWritten && (anyDirty || anyNever) && !a.Bitmap.Dirty(r) {
			m.fail("grown bitmap: region %d (of %d sectors) is not dirty; its old regions (of %d sectors) written %v dirty %v, never-written space in it %v", r, ng.RegionSectors, old.RegionSectors, written[r*k:min((r+1)*k, old.Regions)], dirty[r*k:min((r+1)*k, old.Regions)], anyNever)
		}
	}
}

// inSync is the set of disks holding an active role.
func (m *arrayModel) inSync() map[string]bool {
	in := map[string]bool{}
	for r, ms := range m.a.Engine.State().Members {
		if ms.State == engine.MemberActive {
			in[m.pathOf(r)] = true
		}
	}
	return in
}

// copyLostSinceCrash reports whether a disk in sync at the assembly after
// the last kill or power cut is no longer.
func (m *arrayModel) copyLostSinceCrash() bool {
	if m.inSyncAtCrash == nil || m.a == nil {
		return false
	}
	now := m.inSync()
	for p := range m.inSyncAtCrash {
		if !now[p] {
			return true
		}
	}
	return false
}

// assemble opens the array from the disks: every one that held a role or
// was a spare (which must succeed), or a drawn subset in a drawn order.
func (m *arrayModel) assemble(t *rapid.T, all bool) {
	disks := slices.Clone(m.disks)
	// Drawn order
	for i := len(disks) - 1; i > 0; i-- {
		j := rapid.IntRange(0, i).Draw(t, "order")
		disks[i], disks[j] = disks[j], disks[i]
	}
	subset := !all && rapid.Bool().Draw(t, "subset")
	if subset {
		k := rapid.IntRange(1, len(disks)).Draw(t, "subsetsize")
		disks = disks[:k]
	}
	// Disks that never were in the array carry no superblock: left out
	// (Open would take them as blank spares). Faults are healed: a disk
	// that cannot be read is not one that survived.
	var give []string
	fresh := false
	for _, p := range disks {
		d := m.rack.Disk(p)
		m.rack.SetFaults(d)
		// A superblock torn by a power cut, primary and shadow (a
		// member whose layout has none), is no superblock: Open refuses
		// an assembly naming such a device; the model leaves it out (the
		// one event of slack). A torn primary whose shadow holds the
		// update is a superblock (engine.ReadSuperblock).
		if _, _, err := m.readSB(d); err == nil {
			give = append(give, p)
			fresh = fresh || !m.stale[p]
		}
	}
	if subset && !fresh {
		// Only stale members: the array would start from their old
		// data, as md would; not what this model checks.
		m.assemble(t, true)
		return
	}
	spec := m.spec()
	a, err := Open(give, spec, false)
	m.logf("assemble %v: %v", give, err)
	if err == nil && slices.ContainsFunc(a.Warnings, func(w string) bool { return strings.Contains(w, "started dirty and degraded") }) {
		// (Checked as strictly as any assembly: not forcedDirty.)
		m.count("assembly: dirty degraded, started by the write-hole log")
	}
	if errors.Is(err, engine.ErrDirtyDegraded) {
		// md's "cannot start dirty degraded array": the operator forces
		// it (and the write hole is open: see writeHole).
		if !m.parity() {
			m.fail("assembly of raid%d refused as dirty and degraded: %v", m.level, err)
		}
		m.count("assembly refused: dirty degraded; forced")
		spec.Force = true
		a, err = Open(give, spec, false)
		m.logf("assemble %v with force: %v", give, err)
		if err == nil {
			m.forcedDirty = true
		}
	}
	if err != nil {
		if m.cutArmed && !m.rack.Armed() {
			// The armed power cut ended the assembly (its writes: the
			// write-hole log's replay): the reboot follows the step.
			m.count("power cut during assembly")
			return
		}
		if !subset && m.lost {
			// The array had failed: nothing promises it assembles.
			m.count("assembly refused (array had failed)")
			m.over = true
			return
		}
		if !subset {
			m.fail("availability: assembly of %v failed: %v\n  superblocks: %s", give, err, m.superblocks(give))
		}
		m.count("assembly refused (subset)")
		// The whole set must assemble.
		m.assemble(t, true)
		return
	}
	m.count("assembled")
	if got := a.Engine.ArraySectors(); got < m.grownTo {
		a.Close()
		m.fail("availability: the array was grown to %d sectors, assembled at %d\n  superblocks: %s", m.grownTo, got, m.superblocks(give))
	}
	st := a.Engine.State()
	for r, ms := range st.Members {
		if ms.State != engine.MemberActive || a.Members[r] == nil {
			continue
		}
		if p := a.Members[r].Path; m.stale[p] && m.staleKnown {
			a.Close()
			m.fail("a stale member %s came back in sync as role %d", p, r)
		}
	}
	m.start(a)
	m.markStale()
}

// markStale records as stale every disk that holds no in-sync role (and
// whether that is what the disks record: not after a kill or power cut,
// where the durable state may be behind).
func (m *arrayModel) markStale() {
	clear(m.stale)
	for _, p := range m.disks {
		m.stale[p] = true
	}
	st := m.a.Engine.State()
	for r, ms := range st.Members {
		if ms.State == engine.MemberActive {
			delete(m.stale, m.pathOf(r))
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// states describes the roles for the log.
func (m *arrayModel) states() string {
	if m.a == nil {
		return "(stopped)"
	}
	st := m.a.Engine.State()
	var b strings.Builder
	for r, ms := range st.Members {
		fmt.Fprintf(&b, "%d:%s=%s ", r, m.pathOf(r), ms.State)
	}
	m.a.mu.Lock()
	fmt.Fprintf(&b, "events %d", m.a.events)
	m.a.mu.Unlock()
	return b.String()
}

// noneActive reports whether some chunk has no in-sync copy (raid1: no
// member in sync), or there is no array.
func (m *arrayModel) noneActive() bool {
	if m.a == nil {
		return true
	}
	// Some chunk without an in-sync copy (raid1: no member in sync).
	return !m.a.Engine.CoveredWithout(-1)
}

// readSB reads d's superblock as the array does, from what a power cut
// left on it.
func (m *arrayModel) readSB(d *memdev.Disk) (*engine.Superblock, bool, error) {
	size := m.rack.Size(d)
	return engine.ReadSuperblock(func(off int64, n int) ([]byte, error) {
		if off < 0 || off+int64(n) > size {
			return nil, io.EOF
		}
		return m.rack.Current(d, off, n), nil
	}, size)
}

// superblocks describes the disks' superblocks as a power cut left them
// (for an availability failure).
func (m *arrayModel) superblocks(paths []string) string {
	var b strings.Builder
	for _, p := range paths {
		sb, shadow, err := m.readSB(m.rack.Disk(p))
		if err != nil {
			fmt.Fprintf(&b, "%s: %v; ", p, err)
			continue
		}
		fmt.Fprintf(&b, "%s: role %d events %d shadow %v roles", p, sb.Role, sb.Events, shadow)
		for r := range m.n {
			fmt.Fprintf(&b, " %d:%v", r, sb.Roles[r].State)
		}
		b.WriteString("; ")
	}
	return b.String()
}
