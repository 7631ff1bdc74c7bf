package bitmap

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The model: a RAID 1 of 1 to 3 members with recording fake members (each
// a bitmap area and, per region, the set of data writes it received), queue
// threads issuing writes, the flusher preparing, writing and committing
// batches, members failing and coming back, and crashes, all interleaved by
// rapid. It checks:
//
//   - a data write reaches a member only when every member copy that Load
//     would use says its regions are dirty, and no bitmap block write in
//     flight says otherwise (durable = the batch was committed);
//   - every bitmap block that lands on a member (and every block in flight)
//     says clean or never written only for regions with no data write in
//     flight whose copies are equal on every member (missing ones too), and
//     never written only for regions never written;
//   - re-adding a member: every region where it differs is dirty;
//   - events cleared (md's rule for re-add): for the image of a member as
//     it left (its failure recorded in the superblocks), kept aside, if
//     its superblock events are not older than EventsCleared, every
//     region where it differs from a present member is dirty, at every
//     step and after every crash;
//   - a crash at any step (in-flight bitmap block writes lost, torn, or
//     landed, on any subset of members; in-flight data writes landed on any
//     subset), then Load: every region whose copies differ is dirty and
//     needs sync, and every region ever written is not never-written;
//   - liveness: once the flusher drains, every waiting write was released.

// modelRegions with 1024-byte blocks (1008 states each) make three data
// blocks: regions 0..1007, 1008..2015, 2016..2099.
const (
	modelRegions = 2100
	modelBS      = 1024
)

// modelStarts are the regions writes start at: block edges and a few
// others (a write spans one region or the next too).
var modelStarts = []int{0, 1, 500, 1006, 1007, 1008, 1009, 2014, 2015, 2016, 2099}

type regionData struct {
	n int    // writes received
	h uint64 // xor of their ids
}

type mWrite struct {
	token         Waiter
	first, last   int
	id            uint64
	issued        bool   // ready or released: may go to the members
	arrived       []bool // per member
	grandfathered bool   // issued before the current member failure
}

type mBlockWrite struct {
	index   int
	data    []byte
	pending []bool // per member
}

type mFlight struct {
	bt     *Batch
	blocks []*mBlockWrite
}

type model struct {
	t       *rapid.T
	cfg     Config
	opts    Options
	bm      *Bitmap
	g       Geometry
	members int
	areas   [][]byte
	views   []*copyView // decoded areas, nil when stale
	present []bool
	data    [][]regionData
	writes  []*mWrite
	flights []*mFlight
	now     time.Duration
	written []bool

	sbEvents    uint64 // the superblocks' generation
	sbMissing   int    // the missing member the superblocks record, or -1
	missing     int    // the member missing now, or -1
	readding    bool
	bump        uint64 // the generation waiting for its header to commit, or 0
	bumpMissing int    // sbMissing once it commits
	failing     bool   // the bump records a failure: new writes are held

	nextToken Waiter
	nextID    uint64
	crashes   int
	allDirty  int

	departed []*departedImage
}

// departedImage is a member's data as it failed, with the superblock
// generation it had: what a re-add of it kept aside would bring back.
type departedImage struct {
	member   int
	events   uint64
	data     []regionData
	recorded bool // the superblocks record the failure
}

func newModel(t *rapid.T) *model {
	m := &model{
		t:         t,
		members:   rapid.IntRange(1, 3).Draw(t, "members"),
		sbEvents:  1,
		sbMissing: -1,
		missing:   -1,
	}
	m.cfg = testConfig(t, modelRegions, modelBS)
	m.opts = Options{ClearDelay: 5 * time.Second, MaxClearDelay: 40 * time.Second}
	init := InitialState(rapid.IntRange(0, 2).Draw(t, "init"))
	bm, err := Create(m.cfg, init, m.opts)
	if err != nil {
		t.Fatal(err)
	}
	m.bm, m.g = bm, bm.Geometry()
	m.areas = make([][]byte, m.members)
	m.present = make([]bool, m.members)
	m.data = make([][]regionData, m.members)
	for p := range m.members {
		m.areas[p] = make([]byte, m.cfg.AreaBytes)
		m.present[p] = true
		m.data[p] = make([]regionData, modelRegions)
	}
	m.written = make([]bool, modelRegions)
	m.views = make([]*copyView, m.members)
	return m
}

// run executes a random sequence of enabled actions.
func (m *model) run(crashes bool) {
	t := m.t
	steps := rapid.IntRange(100, 500).Draw(t, "steps")
	for range steps {
		// Weighted: each action name appears as often as its weight.
		var acts []string
		add := func(name string, weight int, enabled bool) {
			for range weight * min(1, boolInt(enabled)) {
				acts = append(acts, name)
			}
		}
		add("start", 4, true)
		add("prepare", 3, true)
		add("tick", 3, true)
		add("arrive", 4, m.arrivable() != nil)
		add("end", 3, m.endable() != nil)
		add("apply", 4, len(m.flights) > 0)
		add("commit", 3, len(m.flights) > 0)
		add("flush", 2, len(m.flights) > 0)
		add("failbatch", 1, len(m.flights) > 0 && m.bump == 0)
		add("fail", 1, m.members > 1 && m.missing < 0 && m.bump == 0)
		add("readd", 1, m.missing >= 0 && !m.readding && m.bump == 0 && !slices.ContainsFunc(m.writes, func(w *mWrite) bool { return w.issued }))
		add("resync", 1, m.resyncable() != nil)
		add("crash", 1, crashes)
		switch rapid.SampledFrom(acts).Draw(t, "action") {
		case "start":
			m.start()
		case "arrive":
			m.arrive()
		case "end":
			m.end()
		case "prepare":
			m.launch(m.bm.Prepare())
		case "tick":
			dt := rapid.SampledFrom([]time.Duration{0, 100 * time.Millisecond, time.Second, 3 * time.Second, 5 * time.Second, 7 * time.Second, 12 * time.Second, 30 * time.Second, 2 * time.Minute}).Draw(t, "dt")
			m.now += dt
			m.launch(m.bm.Tick(m.now))
			m.checkDeparted("after a tick") // clears happen only here
		case "apply":
			m.apply()
		case "commit":
			m.commit()
		case "flush":
			m.flush(rapid.SampledFrom(m.flights).Draw(t, "batch"))
		case "failbatch":
			m.failBatch(rapid.SampledFrom(m.flights).Draw(t, "batch"))
		case "fail":
			m.fail()
		case "readd":
			m.readd()
		case "resync":
			m.resync()
			m.checkDeparted("after a resync")
		case "crash":
			m.crash()
		}
		m.check()
	}
	m.drain()
}

func (m *model) start() {
	t := m.t
	first := rapid.SampledFrom(modelStarts).Draw(t, "first")
	last := first
	if first+1 < modelRegions && rapid.Bool().Draw(t, "span") {
		last = first + 1
	}
	m.nextID++
	w := &mWrite{token: m.nextToken, first: first, last: last, id: mix64(m.nextID), arrived: make([]bool, m.members)}
	m.nextToken++
	m.writes = append(m.writes, w)
	if m.bm.StartWrite(first, last, w.token) {
		m.issue(w, "ready")
	}
}

func (m *model) issue(w *mWrite, why string) {
	if w.issued {
		m.t.Fatalf("write %d released twice", w.token)
	}
	w.issued = true
	if m.held(w) {
		return // checked when it reaches a member
	}
	for r := w.first; r <= w.last; r++ {
		m.checkDurable(r, why)
	}
}

// held reports whether an issued write is held because a member failure
// is not recorded in the superblocks yet.
func (m *model) held(w *mWrite) bool { return m.failing && !w.grandfathered }

// arrivable returns the writes that may reach a present member.
func (m *model) arrivable() []*mWrite {
	var ws []*mWrite
	for _, w := range m.writes {
		if !w.issued || m.held(w) {
			continue
		}
		for p := range m.members {
			if m.present[p] && !w.arrived[p] {
				ws = append(ws, w)
				break
			}
		}
	}
	return ws
}

func (m *model) arrive() {
	t := m.t
	w := rapid.SampledFrom(m.arrivable()).Draw(t, "write")
	var ps []int
	for p := range m.members {
		if m.present[p] && !w.arrived[p] {
			ps = append(ps, p)
		}
	}
	p := rapid.SampledFrom(ps).Draw(t, "member")
	for r := w.first; r <= w.last; r++ {
		m.checkDurable(r, "data write reaching a member")
	}
	m.land(w, p)
}

func (m *model) land(w *mWrite, p int) {
	for r := w.first; r <= w.last; r++ {
		m.data[p][r].n++
		m.data[p][r].h ^= w.id
		m.written[r] = true
	}
	w.arrived[p] = true
}

// endable returns the writes complete on every present member.
func (m *model) endable() []*mWrite {
	var ws []*mWrite
	for _, w := range m.writes {
		if !w.issued {
			continue
		}
		done := true
		for p := range m.members {
			done = done && (!m.present[p] || w.arrived[p])
		}
		if done {
			ws = append(ws, w)
		}
	}
	return ws
}

func (m *model) end() {
	w := rapid.SampledFrom(m.endable()).Draw(m.t, "write")
	m.bm.EndWrite(w.first, w.last)
	m.writes = slices.DeleteFunc(m.writes, func(x *mWrite) bool { return x == w })
}

// launch starts writing a batch to the present members.
func (m *model) launch(bt *Batch) {
	if bt == nil {
		return
	}
	f := &mFlight{bt: bt}
	for _, blk := range bt.Blocks {
		bw := &mBlockWrite{index: blk.Index, data: bytes.Clone(blk.Data), pending: slices.Clone(m.present)}
		m.checkTruthful(bw.index, bw.data, "prepared")
		f.blocks = append(f.blocks, bw)
	}
	m.flights = append(m.flights, f)
}

// apply lands one pending block write on one member.
func (m *model) apply() {
	t := m.t
	type pend struct {
		bw *mBlockWrite
		p  int
	}
	var ps []pend
	for _, f := range m.flights {
		for _, bw := range f.blocks {
			for p, ok := range bw.pending {
				if ok {
					ps = append(ps, pend{bw, p})
				}
			}
		}
	}
	if len(ps) == 0 {
		return
	}
	x := rapid.SampledFrom(ps).Draw(t, "block write")
	m.checkTruthful(x.bw.index, x.bw.data, "block landing")
	m.writeArea(x.p, x.bw.index, x.bw.data)
	x.bw.pending[x.p] = false
}

// commit commits a batch whose writes all landed.
func (m *model) commit() {
	var done []*mFlight
	for _, f := range m.flights {
		if !slices.ContainsFunc(f.blocks, func(bw *mBlockWrite) bool { return slices.Contains(bw.pending, true) }) {
			done = append(done, f)
		}
	}
	if len(done) == 0 {
		return
	}
	f := rapid.SampledFrom(done).Draw(m.t, "batch")
	m.committed(f)
}

func (m *model) committed(f *mFlight) {
	events := f.bt.Events
	rel := m.bm.Committed(f.bt, nil)
	m.retired(f, events, rel)
}

// failBatch: a member kept in sync (the last copy of some data, in the
// array) failed a block of the batch, which Failed takes back: each of its
// pending block writes lands or not, the writes waiting for its regions
// fail and end unissued, and its blocks are written again later. Drawn
// only while no generation is pending: the array lets a pending one go on
// after a failed batch (a member whose header is older is not trusted),
// which this model of the bitmap alone does not follow.
func (m *model) failBatch(f *mFlight) {
	for _, bw := range f.blocks {
		for p, ok := range bw.pending {
			if ok && rapid.Bool().Draw(m.t, "lands") {
				m.checkTruthful(bw.index, bw.data, "block landing")
				m.writeArea(p, bw.index, bw.data)
			}
			bw.pending[p] = false
		}
	}
	events := f.bt.Events
	rel, failed := m.bm.Failed(f.bt, nil, nil)
	for _, tok := range failed {
		i := slices.IndexFunc(m.writes, func(w *mWrite) bool { return w.token == tok })
		if i < 0 || m.writes[i].issued {
			m.t.Fatalf("failed token %d: unknown or already released", tok)
		}
		w := m.writes[i]
		m.bm.EndWrite(w.first, w.last)
		m.writes = slices.Delete(m.writes, i, i+1)
	}
	m.retired(f, events, rel)
}

// retired takes f out of flight after its Committed or Failed: the
// released writes are issued, and a header it wrote lets the superblocks
// take a new generation.
func (m *model) retired(f *mFlight, events uint64, rel []Waiter) {
	m.flights = slices.DeleteFunc(m.flights, func(x *mFlight) bool { return x == f })
	for _, tok := range rel {
		i := slices.IndexFunc(m.writes, func(w *mWrite) bool { return w.token == tok })
		if i < 0 {
			m.t.Fatalf("released unknown token %d", tok)
		}
		m.issue(m.writes[i], "released")
	}
	if m.bump != 0 && events >= m.bump {
		// The superblocks are written with the new generation.
		m.sbEvents, m.sbMissing = m.bump, m.bumpMissing
		for _, d := range m.departed {
			d.recorded = d.recorded || d.member == m.sbMissing
		}
		clear(m.views)
		m.bump, m.failing = 0, false
		if m.readding {
			m.bm.SetMissing(m.missing, false)
			m.missing, m.readding = -1, false
		}
	}
}

// fail makes a member fail: its pending block writes are lost or land,
// writes already issued may still complete elsewhere, and new writes are
// held until the superblocks record the failure.
func (m *model) fail() {
	t := m.t
	p := rapid.IntRange(0, m.members-1).Draw(t, "failing member")
	m.missing, m.present[p] = p, false
	m.bm.SetMissing(p, true)
	if len(m.departed) == 4 {
		m.departed = m.departed[1:]
	}
	m.departed = append(m.departed, &departedImage{member: p, events: m.sbEvents, data: slices.Clone(m.data[p])})
	for _, f := range m.flights {
		for _, bw := range f.blocks {
			if bw.pending[p] && rapid.Bool().Draw(t, "lands") {
				m.writeArea(p, bw.index, bw.data)
			}
			bw.pending[p] = false
		}
	}
	for _, w := range m.writes {
		w.grandfathered = w.issued
	}
	m.bump = max(m.sbEvents, m.bm.Events()) + 1
	m.bumpMissing, m.failing = p, true
	m.bm.SetEvents(m.bump)
}

// readd brings the missing member back: the regions where it differs
// must all be dirty; they are recovered and the bitmap rewritten.
func (m *model) readd() {
	p := m.missing
	dirty := m.bm.DirtyRegions(nil)
	ref := slices.Index(m.present, true)
	for r := range modelRegions {
		for q := range m.members {
			if m.present[q] && m.data[p][r] != m.data[q][r] && !slices.Contains(dirty, r) {
				m.t.Fatalf("re-add: member %d differs from member %d in region %d, which is %v", p, q, r, m.bm.State(r))
			}
		}
	}
	for _, r := range dirty {
		m.data[p][r] = m.data[ref][r]
	}
	m.present[p], m.readding = true, true
	m.bm.RewriteAll()
	m.bump = max(m.sbEvents, m.bm.Events()) + 1
	m.bumpMissing = -1
	m.bm.SetEvents(m.bump)
}

// resyncable returns regions needing sync with no write in flight.
func (m *model) resyncable() []int {
	var rs []int
	for _, r := range modelStarts {
		for _, r := range []int{r, r + 1} {
			if r < modelRegions && m.bm.NeedsSync(r) && !m.outstanding(r) {
				rs = append(rs, r)
			}
		}
	}
	return rs
}

func (m *model) resync() {
	rs := m.resyncable()
	if rapid.Bool().Draw(m.t, "resync all") {
		rs = nil
		for r := range modelRegions {
			if m.bm.NeedsSync(r) && !m.outstanding(r) {
				rs = append(rs, r)
			}
		}
	} else {
		rs = []int{rapid.SampledFrom(rs).Draw(m.t, "region")}
	}
	ref := slices.Index(m.present, true)
	for _, r := range rs {
		for q := range m.members {
			if m.present[q] {
				m.data[q][r] = m.data[ref][r]
			}
		}
		m.bm.ResyncDone(r, r)
	}
}

// outstanding reports whether an issued write to r has not ended.
func (m *model) outstanding(r int) bool {
	return slices.ContainsFunc(m.writes, func(w *mWrite) bool { return w.issued && w.first <= r && r <= w.last })
}

// crash drops every in-memory state: block writes in flight are lost,
// torn or land on each member independently, data writes in flight land
// or not; then the array is assembled from the members' areas.
func (m *model) crash() {
	t := m.t
	m.crashes++
	for _, f := range m.flights {
		for _, bw := range f.blocks {
			for p, ok := range bw.pending {
				if !ok {
					continue
				}
				area := bytes.Clone(m.areas[p][m.g.BlockOffset(bw.index)-m.g.AreaOffset:][:modelBS])
				switch rapid.IntRange(0, 2).Draw(t, "block write fate") {
				case 1: // lands
					copy(area, bw.data)
				case 2: // torn: some sectors new
					for s := 0; s < modelBS; s += SectorSize {
						if rapid.Bool().Draw(t, "sector lands") {
							copy(area[s:s+SectorSize], bw.data[s:])
						}
					}
				}
				m.writeArea(p, bw.index, area)
			}
		}
	}
	for _, w := range m.writes {
		if !w.issued || m.held(w) {
			continue
		}
		for p := range m.members {
			if m.present[p] && !w.arrived[p] && rapid.Bool().Draw(t, "data write lands") {
				m.land(w, p)
			}
		}
	}
	m.writes, m.flights = nil, nil
	// A failure not recorded: the member is assembled back and runs on in
	// the same generation; its image is not one as it left.
	m.departed = slices.DeleteFunc(m.departed, func(d *departedImage) bool { return !d.recorded })
	// Assemble: the superblocks say which member is missing.
	m.bump, m.failing, m.readding = 0, false, false
	m.missing = m.sbMissing
	for p := range m.present {
		m.present[p] = p != m.missing
	}
	cfg := m.cfg
	cfg.Events = m.sbEvents
	// Only the copies of members the superblocks say are in sync.
	copies := slices.Clone(m.areas)
	if m.sbMissing >= 0 {
		copies[m.sbMissing] = nil
	}
	bm, info, err := Assemble(cfg, copies, m.opts)
	if err != nil {
		t.Fatal(err)
	}
	if info.AllDirty {
		if !errors.Is(info.Err, ErrCorrupt) && !errors.Is(info.Err, ErrNoBitmap) && !errors.Is(info.Err, ErrStale) {
			t.Fatalf("Load: unexpected error %v", info.Err)
		}
		m.allDirty++
	}
	if bm.Geometry() != m.g {
		t.Fatalf("assembled geometry %+v, want %+v", bm.Geometry(), m.g)
	}
	m.bm = bm
	if m.missing >= 0 {
		bm.SetMissing(m.missing, true)
	}
	for r := range modelRegions {
		if m.divergent(r) && (bm.State(r) != Dirty || !bm.NeedsSync(r)) {
			t.Fatalf("after crash %d: region %d differs between members (%v) but is %v (needs sync %v)", m.crashes, r, m.regionData(r), bm.State(r), bm.NeedsSync(r))
		}
		if m.written[r] && !bm.Written(r) {
			t.Fatalf("after crash %d: region %d was written but is never-written", m.crashes, r)
		}
	}
	m.checkDeparted("after a crash")
}

// checkDeparted checks md's events_cleared rule for every image of a
// member as it left: unless its events are older than EventsCleared,
// every region where it differs from a present member is dirty (a re-add
// of it copying only the dirty regions would make it equal).
func (m *model) checkDeparted(why string) {
	cleared := m.bm.EventsCleared()
	if cleared > m.bm.Events() || cleared == 0 {
		m.t.Fatalf("%s: events cleared %d, events %d", why, cleared, m.bm.Events())
	}
	for _, d := range m.departed {
		if d.events < cleared {
			continue
		}
		for r := range modelRegions {
			for q := range m.members {
				// Dirty in the image and not durable yet (after Load,
				// until the first batch commits) is dirty too: it cannot
				// be cleared before.
				if m.present[q] && m.data[q][r] != d.data[r] && !m.bm.Dirty(r) && m.bm.State(r) != Dirty {
					m.t.Fatalf("%s: the image of member %d as it left (events %d, events cleared %d) differs from member %d in region %d, which is %v",
						why, d.member, d.events, cleared, q, r, m.bm.State(r))
				}
			}
		}
	}
}

func (m *model) divergent(r int) bool {
	for p := 1; p < m.members; p++ {
		if m.data[p][r] != m.data[0][r] {
			return true
		}
	}
	return false
}

func (m *model) regionData(r int) []regionData {
	var d []regionData
	for p := range m.members {
		d = append(d, m.data[p][r])
	}
	return d
}

// copyView is a member's copy, decoded.
type copyView struct {
	// current: Load would use it: the superblocks say the member is in
	// sync and its header is not older than theirs.
	current bool
	states  [][]byte // per block (index 1..): the states, nil if the block is invalid
}

// writeArea writes block blk of member p's copy.
func (m *model) writeArea(p, blk int, data []byte) {
	copy(m.areas[p][m.g.BlockOffset(blk)-m.g.AreaOffset:], data)
	m.views[p] = nil
}

// view decodes member p's copy (cached until it is written or the
// superblocks change).
func (m *model) view(p int) *copyView {
	if v := m.views[p]; v != nil {
		return v
	}
	v := &copyView{states: make([][]byte, m.g.Blocks())}
	h, err := findHeader(m.areas[p], m.cfg.AreaOffset, m.cfg.ArrayUUID)
	v.current = err == nil && h.Events >= m.sbEvents && p != m.sbMissing
	for blk := 1; blk < m.g.Blocks(); blk++ {
		if states, _, err := DecodeBlock(m.areas[p][m.g.BlockOffset(blk)-m.g.AreaOffset:], &m.g, blk); err == nil {
			v.states[blk] = bytes.Clone(states)
		}
	}
	m.views[p] = v
	return v
}

// checkDurable checks that region r is dirty in every copy Load would use
// and in every block write in flight.
func (m *model) checkDurable(r int, why string) {
	blk := m.g.BlockOf(r)
	first, _ := m.g.BlockRegions(blk)
	for p := range m.members {
		v := m.view(p)
		if !v.current {
			continue
		}
		states := v.states[blk]
		if states == nil {
			m.t.Fatalf("%s: region %d: member %d's block %d is invalid", why, r, p, blk)
		}
		if State(states[r-first]) != Dirty {
			m.t.Fatalf("%s: region %d is %v on member %d", why, r, State(states[r-first]), p)
		}
	}
	for _, f := range m.flights {
		for _, bw := range f.blocks {
			if bw.index == blk && State(bw.data[r-first]) != Dirty && slices.Contains(bw.pending, true) {
				m.t.Fatalf("%s: region %d: a block write in flight says %v", why, r, State(bw.data[r-first]))
			}
		}
	}
}

// checkTruthful checks the states of a data block: clean or never written
// only where no write is in flight and the members' copies are equal.
func (m *model) checkTruthful(blk int, data []byte, why string) {
	if blk == 0 {
		return
	}
	states, _, err := DecodeBlock(data, &m.g, blk)
	if err != nil {
		m.t.Fatalf("%s: block %d: %v", why, blk, err)
	}
	first, _ := m.g.BlockRegions(blk)
	for j, s := range states {
		r := first + j
		if State(s) == Dirty {
			continue
		}
		switch {
		case m.outstanding(r):
			m.t.Fatalf("%s: block %d says region %d is %v while a write to it is in flight", why, blk, r, State(s))
		case m.divergent(r):
			m.t.Fatalf("%s: block %d says region %d is %v but its copies differ (%v)", why, blk, r, State(s), m.regionData(r))
		case State(s) == NeverWritten && m.written[r]:
			m.t.Fatalf("%s: block %d says region %d was never written", why, blk, r)
		}
	}
}

// check is the invariant after every step: regions with writes in flight
// are durable-dirty.
func (m *model) check() {
	for _, w := range m.writes {
		if w.issued && !m.held(w) {
			for r := w.first; r <= w.last; r++ {
				m.checkDurable(r, "invariant")
			}
		}
	}
}

// flush lands a whole batch on every member and commits it.
func (m *model) flush(f *mFlight) {
	for _, bw := range f.blocks {
		for p, ok := range bw.pending {
			if ok {
				m.checkTruthful(bw.index, bw.data, "block landing")
				m.writeArea(p, bw.index, bw.data)
				bw.pending[p] = false
			}
		}
	}
	m.committed(f)
}

// drain lands and commits everything, and prepares until the flusher has
// nothing left: every waiting write must have been released.
func (m *model) drain() {
	for range 100 {
		for len(m.flights) > 0 {
			m.flush(m.flights[0])
		}
		m.launch(m.bm.Prepare())
		if len(m.flights) == 0 {
			break
		}
	}
	if m.bump != 0 || m.bm.HasWork() {
		m.t.Fatalf("drain: flusher not idle (bump %d)", m.bump)
	}
	for _, w := range m.writes {
		if !w.issued {
			m.t.Fatalf("write %d to regions %d..%d never released", w.token, w.first, w.last)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mix64 is splitmix64's finalizer: distinct ids for distinct inputs.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		newModel(t).run(false)
	})
}

func TestModelCrash(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		newModel(t).run(true)
	})
}
