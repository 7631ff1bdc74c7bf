package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// simMember is a simulated member: it serves its queue of operations one at
// a time (a rate-limited disk, like qemu's iops= throttling), or up to
// slots at once with a fixed latency each (slots > 1: a device with
// internal parallelism).
type simMember struct {
	svc   time.Duration
	slots int
	busy  []simOp // in service, at most slots
	queue []simOp // waiting
	reads int     // reads completed
}

type simOp struct {
	tag uint16
	op  OpID
	io  MemberIO
	at  time.Duration // completion time once in service
}

// simBackend runs an Executor against simMembers on a fake clock.
type simBackend struct {
	now     time.Duration
	members []*simMember
	done    []uint16        // requests completed, to restart
	lat     []time.Duration // of requests started after warm-up
	warm    time.Duration
	started []time.Duration // per tag
}

func (b *simBackend) Submit(tag uint16, op OpID, io MemberIO, _ []byte) {
	m := b.members[io.Member]
	o := simOp{tag: tag, op: op, io: io}
	if len(m.busy) < m.slots {
		o.at = b.now + m.svc
		m.busy = append(m.busy, o)
	} else {
		m.queue = append(m.queue, o)
	}
}

func (b *simBackend) Complete(tag uint16, err error) {
	if err != nil {
		panic(err)
	}
	b.done = append(b.done, tag)
	if b.started[tag] >= b.warm {
		b.lat = append(b.lat, b.now-b.started[tag])
	}
}

func (b *simBackend) Persist(*ArrayState) { panic("no persist in the simulation") }

// step delivers the next completion; it returns false when nothing is in
// flight.
func (b *simBackend) step(e *Executor) bool {
	var m *simMember
	bi := -1
	for _, c := range b.members {
		for i, o := range c.busy {
			if m == nil || o.at < m.busy[bi].at {
				m, bi = c, i
			}
		}
	}
	if m == nil {
		return false
	}
	o := m.busy[bi]
	m.busy = append(m.busy[:bi], m.busy[bi+1:]...)
	b.now = o.at
	if len(m.queue) > 0 {
		n := m.queue[0]
		m.queue = m.queue[1:]
		n.at = b.now + m.svc
		m.busy = append(m.busy, n)
	}
	m.reads++
	e.Done(o.tag, o.op, int32(o.io.Sectors)<<9)
	return true
}

type simResult struct {
	iops  float64 // reads per second
	share []float64
	p99   time.Duration // after the first 10 ms
}

func (r simResult) String() string {
	return fmt.Sprintf("%.0f IOPS, shares %.2f, p99 latency %v", r.iops, r.share, r.p99)
}

// simulate runs a closed loop of random 4 KiB reads at queue depth qd on a
// 2-way raid1 (or raid10 n2 over 2 members) of the given members until n
// reads completed. timed gives the executor the fake clock; configure
// adjusts the balancer.
func simulate(t testing.TB, g Geometry, members []*simMember, qd, n int, timed bool, configure func(*Balance)) simResult {
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	be := &simBackend{members: members, started: make([]time.Duration, qd), warm: 10 * time.Millisecond}
	e := NewExecutor(arr, be, qd, 4096)
	if timed {
		e.Now = func() time.Duration { return be.now }
	}
	if configure != nil {
		configure(e.Balance())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4096)
	blocks := g.ArraySectors() / 8
	start := func(tag uint16) {
		be.started[tag] = be.now
		e.Start(tag, ReqRead, rng.Uint64N(blocks)*8, 8, false, buf)
	}
	for tag := range qd {
		start(uint16(tag))
	}
	completed := 0
	for completed < n && be.step(e) {
		for _, tag := range be.done {
			completed++
			start(tag)
		}
		be.done = be.done[:0]
	}
	res := simResult{iops: float64(completed) / be.now.Seconds()}
	total := 0
	for _, m := range members {
		total += m.reads
	}
	for _, m := range members {
		res.share = append(res.share, float64(m.reads)/float64(total))
	}
	slices.Sort(be.lat)
	res.p99 = be.lat[len(be.lat)*99/100]
	return res
}

func mixedPair(fast, slow time.Duration) []*simMember {
	return []*simMember{{svc: fast, slots: 1}, {svc: slow, slots: 1}}
}

var mirrorGeometries = []Geometry{
	{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1 << 21},
	{Level: Level10, Members: 2, Layout: LayoutN2, ChunkSectors: 128, MemberSectors: 1 << 21},
}

// On a mirror of a fast and a slow member at QD32, reads split roughly in
// proportion to speed, and the array beats both a 50/50 split and sending
// everything to the fast member.
func TestBalanceMixedSpeed(t *testing.T) {
	const fast, slow = 100 * time.Microsecond, 300 * time.Microsecond
	for _, g := range mirrorGeometries {
		t.Run(g.Level.String(), func(t *testing.T) {
			r := simulate(t, g, mixedPair(fast, slow), 32, 40000, true, nil)
			onFast := simulate(t, g, mixedPair(fast, slow), 32, 40000, true, func(b *Balance) { b.WriteMostly = 2 })
			untimed := simulate(t, g, mixedPair(fast, slow), 32, 40000, false, nil)
			half := 2 / slow.Seconds() // 50/50: the slow member bounds the array
			t.Logf("latency-weighted: %v", r)
			t.Logf("all on fast:      %v", onFast)
			t.Logf("least loaded:     %v", untimed)
			t.Logf("50/50 bound:      %.0f IOPS", half)
			want := slow.Seconds() / (fast.Seconds() + slow.Seconds()) // fast's share by speed: 0.75
			if s := r.share[0]; s < want-0.05 || s > want+0.05 {
				t.Errorf("fast member's share %.3f, want %.2f ± 0.05", s, want)
			}
			ideal := 1/fast.Seconds() + 1/slow.Seconds()
			if r.iops < 0.95*ideal {
				t.Errorf("%.0f IOPS, want >= 95%% of the members' sum %.0f", r.iops, ideal)
			}
			if r.iops < 1.2*onFast.iops || r.iops < 1.2*half {
				t.Errorf("%.0f IOPS does not beat all-on-fast (%.0f) and 50/50 (%.0f) by 20%%", r.iops, onFast.iops, half)
			}
			if onFast.share[1] != 0 {
				t.Errorf("write-mostly slow member was read: shares %v", onFast.share)
			}
			// Same throughput as least-loaded (both keep both members busy),
			// but reads no longer wait behind an equal count on the slow
			// member: the tail is shorter.
			if r.p99 >= untimed.p99*9/10 {
				t.Errorf("p99 latency %v, least loaded %v: want 10%% lower", r.p99, untimed.p99)
			}
		})
	}
}

// A fast member that serves many reads at once (an SSD) next to a slow
// serial one: every read sent to the slow member holds a queue slot three
// times as long, so the balancer should send it (almost) nothing, where
// least-loaded splits the queue evenly.
func TestBalanceParallelFast(t *testing.T) {
	g := mirrorGeometries[0]
	ms := func() []*simMember {
		return []*simMember{{svc: 100 * time.Microsecond, slots: 32}, {svc: 300 * time.Microsecond, slots: 1}}
	}
	r := simulate(t, g, ms(), 32, 40000, true, nil)
	untimed := simulate(t, g, ms(), 32, 40000, false, nil)
	t.Logf("latency-weighted: %v", r)
	t.Logf("least loaded:     %v", untimed)
	if r.iops < 1.5*untimed.iops {
		t.Errorf("%.0f IOPS, least loaded %.0f: want 1.5x", r.iops, untimed.iops)
	}
	if r.share[1] > 0.05 {
		t.Errorf("slow member's share %.3f, want < 0.05", r.share[1])
	}
}

// At QD1 every read goes to the faster member, except a rare probe of the
// slow one once its estimate has aged.
func TestBalanceQD1(t *testing.T) {
	r := simulate(t, mirrorGeometries[0], mixedPair(100*time.Microsecond, 300*time.Microsecond), 1, 20000, true, nil)
	t.Logf("%v", r)
	if r.share[0] < 0.99 {
		t.Errorf("fast member's share %.4f at QD1, want >= 0.99", r.share[0])
	}
}

// Without a clock the balancer is least-loaded by sectors in flight, as
// LeastLoaded was.
func TestBalanceUntimedIsLeastLoaded(t *testing.T) {
	g := Geometry{Level: Level10, Members: 3, Layout: LayoutN3, ChunkSectors: 8, MemberSectors: 1 << 12}
	b := NewBalance(g)
	b.Window = 0 // no stream affinity: compare the load choice alone
	ll := &LeastLoaded{Inflight: b.Inflight}
	rng := rand.New(rand.NewPCG(3, 4))
	var buf [MaxCopies]Location
	for range 10000 {
		for m := range b.Inflight {
			b.Inflight[m] = int64(rng.IntN(4)) * 8
		}
		locs := g.Locate(rng.Uint64N(g.ArraySectors()), buf[:0])
		ok := uint32(1 + rng.IntN(7))
		if got, want := b.Pick(locs, ok, 8), ll.Pick(locs, ok, 8); got != want {
			t.Fatalf("inflight %v ok %b: Balance picked %d, LeastLoaded %d", b.Inflight, ok, got, want)
		}
	}
}

// A sequential stream stays on the member it started on, up to the window,
// even when another copy is as idle; past the window it may move.
func TestBalanceSequentialAffinity(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1 << 20}
	for _, timed := range []bool{false, true} {
		b := NewBalance(g)
		b.Window = 256
		if timed {
			b.Tick(time.Second)
			b.svc[0], b.svc[1] = 100, 100
			b.lastDone[0], b.lastDone[1] = b.now, b.now // fresh estimates
		}
		var buf [MaxCopies]Location
		pick := func(s uint64) int {
			locs := g.Locate(s, buf[:0])
			return locs[b.Pick(locs, 3, 8)].Member
		}
		// Member 1 busier than member 0 by one read: the stream that started
		// on member 1 stays there.
		b.Inflight[1] = 8
		first := pick(1000)
		if first != 0 {
			t.Fatalf("timed=%v: first read on member %d, want the idle member 0", timed, first)
		}
		b.Inflight[0] = 8 // the stream's read in flight
		b.Inflight[1] = 0
		s := uint64(1008)
		for ; s < 1000+256; s += 8 {
			if m := pick(s); m != 0 {
				t.Fatalf("timed=%v: stream read at %d moved to member %d within the window", timed, s, m)
			}
		}
		if m := pick(s); m != 1 {
			t.Fatalf("timed=%v: past the window the stream stayed on the busier member %d", timed, m)
		}
		// A much busier member loses its stream.
		b.Inflight[1] = 64
		b.Inflight[0] = 0
		pick(5000) // starts on 0
		b.Inflight[0], b.Inflight[1] = 64, 8
		if m := pick(5008); m != 1 {
			t.Fatalf("timed=%v: stream kept on a member with 9x the load", timed)
		}
	}
}

// Write-mostly members are read only when they hold the only eligible copy.
func TestBalanceWriteMostly(t *testing.T) {
	g := Geometry{Level: Level1, Members: 3, ChunkSectors: 128, MemberSectors: 1 << 20}
	arr, _ := NewArray(g)
	b := NewBalance(g)
	b.WriteMostly = 1 << 0
	sc := new(Scratch)
	st := arr.State()
	for i := range 100 {
		b.Inflight[1], b.Inflight[2] = int64(i), 1000
		ios, err := arr.PlanRead(sc, st, uint64(i*8), 8, 0, 0, b, nil)
		if err != nil || ios[0].Member == 0 {
			t.Fatalf("read went to write-mostly member: %v %v", ios, err)
		}
	}
	// Members 1 and 2 unusable: the write-mostly member serves.
	ios, err := arr.PlanRead(sc, st, 0, 8, 1<<1|1<<2, 0, b, nil)
	if err != nil || ios[0].Member != 0 {
		t.Fatalf("write-mostly member not read as the last copy: %v %v", ios, err)
	}
	// Both others failed: it serves everything.
	arr.Fail(1)
	arr.Fail(2)
	ios, err = arr.PlanRead(sc, arr.State(), 64, 8, 0, 0, b, nil)
	if err != nil || ios[0].Member != 0 {
		t.Fatalf("degraded read: %v %v", ios, err)
	}
}

// A rebuilding member is never read at or past its rebuild offset, however
// fast it is; below the offset it takes its share.
func TestBalanceRebuildOffset(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1 << 16}
	arr, _ := NewArray(g)
	const off = 1 << 15
	arr.SetState([]MemberStatus{{State: MemberActive}, {State: MemberRebuilding, RebuildOffset: off}})
	b := NewBalance(g)
	b.Window = 0
	b.Tick(time.Second)
	b.svc[0], b.svc[1] = 1000, 1 // member 1 looks 1000x faster
	b.Inflight[0] = 1 << 20
	sc := new(Scratch)
	st := arr.State()
	rng := rand.New(rand.NewPCG(5, 6))
	below := 0
	for range 10000 {
		s := rng.Uint64N(g.ArraySectors() - 16)
		ios, err := arr.PlanRead(sc, st, s, 16, 0, 0, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, io := range ios {
			if io.Member == 1 {
				if io.Sector+uint64(io.Sectors) > off {
					t.Fatalf("rebuilding member read at %d+%d, past its offset %d", io.Sector, io.Sectors, off)
				}
				below++
			}
		}
	}
	if below == 0 {
		t.Fatal("the rebuilt part of the rebuilding member was never read")
	}
}

// Complete samples service time from the later of submission and the
// member's previous completion (not the queueing before it).
func TestBalanceServiceTime(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1 << 16}
	b := NewBalance(g)
	// Four reads submitted together at t=0 on a member serving one per
	// 100 µs: completions at 100, 200, 300, 400 µs.
	for i := 1; i <= 4; i++ {
		b.Complete(0, 8, 0, time.Duration(i)*100*time.Microsecond)
	}
	if got, want := b.ServiceTime(0), 100*time.Microsecond/8; got < want*99/100 || got > want*101/100 {
		t.Fatalf("service time per sector %v, want %v", got, want)
	}
}

// Aged estimates of an idle member shrink, so it is probed again.
func TestBalanceProbe(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1 << 16}
	b := NewBalance(g)
	b.Window = 0
	b.Complete(0, 8, 0, 100*time.Microsecond)
	b.Complete(1, 8, 0, 800*time.Microsecond)
	var buf [MaxCopies]Location
	locs := g.Locate(0, buf[:0])
	b.Tick(time.Millisecond)
	if i := b.Pick(locs, 3, 8); locs[i].Member != 0 {
		t.Fatal("slow member picked while fresh")
	}
	b.Tick(time.Millisecond + 4*b.ProbeAfter)
	b.lastDone[0] = b.now // member 0 is in use
	if i := b.Pick(locs, 3, 8); locs[i].Member != 1 {
		t.Fatal("idle slow member with an aged estimate not probed")
	}
}

func TestBalancePickNoAlloc(t *testing.T) {
	g := Geometry{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 128, MemberSectors: 1 << 20}
	arr, _ := NewArray(g)
	b := NewBalance(g)
	b.Tick(time.Second)
	b.WriteMostly = 1 << 3
	ios := make([]MemberIO, 0, arr.MaxPlanIOs(512<<10))
	st := arr.State()
	sc := new(Scratch)
	var buf [MaxCopies]Location
	locs := g.Locate(4096, buf[:0])
	s := uint64(0)
	if n := testing.AllocsPerRun(1000, func() {
		b.Pick(locs, 3, 8)
		b.Complete(1, 8, 0, time.Second)
		ios, _ = arr.PlanRead(sc, st, s, 1024, 0, 0, b, ios[:0])
		s += 8
	}); n != 0 {
		t.Fatalf("Pick allocates %v times", n)
	}
}

// memExecBackend completes member operations at once against in-memory
// members (for the benchmark).
type memExecBackend struct {
	e       *Executor
	members [][]byte
	done    int
}

func (b *memExecBackend) Submit(tag uint16, op OpID, io MemberIO, data []byte) {
	m := b.members[io.Member][io.Sector<<9:]
	if io.Kind == IORead {
		copy(data, m)
	} else if io.Kind == IOWrite {
		copy(m, data)
	}
	b.e.Done(tag, op, int32(len(data)))
}
func (b *memExecBackend) Complete(uint16, error) { b.done++ }
func (b *memExecBackend) Persist(*ArrayState)    {}

// BenchmarkExec4KRead: plan + execute one 4 KiB read on a raid10 n2 of
// four in-memory members, timed balancing on.
func BenchmarkExec4KRead(b *testing.B) {
	for _, timed := range []bool{false, true} {
		b.Run(fmt.Sprintf("timed=%v", timed), func(b *testing.B) {
			g := Geometry{Level: Level10, Members: 4, Layout: LayoutN2, ChunkSectors: 128, MemberSectors: 1 << 15}
			arr, _ := NewArray(g)
			be := &memExecBackend{}
			for range g.Members {
				be.members = append(be.members, make([]byte, g.MemberSectors<<9))
			}
			e := NewExecutor(arr, be, 1, 4096)
			be.e = e
			if timed {
				start := time.Now()
				e.Now = func() time.Duration { return time.Since(start) }
			}
			buf := make([]byte, 4096)
			blocks := g.ArraySectors() / 8
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				e.Start(0, ReqRead, uint64(i*7919)%blocks*8, 8, false, buf)
			}
		})
	}
}

// One slow outlier on the fast member (its estimate 80 ms per 4 KiB read)
// sends QD1 reads to the slow member only until the fast one is probed;
// the probe's sample replaces the outlier (a rarely read member's sample
// weighs fully), and reads go back to the fast member.
func TestBalanceOutlierRecovers(t *testing.T) {
	r := simulate(t, mirrorGeometries[0], mixedPair(100*time.Microsecond, time.Millisecond), 1, 40000, true,
		func(b *Balance) {
			b.svc[0] = float64(80*time.Millisecond) / 8
			b.svc[1] = float64(time.Millisecond) / 8
		})
	t.Logf("%v", r)
	if r.share[0] < 0.95 {
		t.Errorf("fast member's share %.3f after an outlier, want >= 0.95", r.share[0])
	}
}

func (b *simBackend) Abandon(uint16, OpID, MemberIO) bool  { return false }
func (b *simBackend) Rebuffer(uint16) []byte               { panic("no abandonment") }
func (b *simBackend) Stale(uint16, OpID)                   {}
func (b *simBackend) Departed(uint16, OpID, MemberIO) bool { return false }

func (b *memExecBackend) Abandon(uint16, OpID, MemberIO) bool  { return false }
func (b *memExecBackend) Rebuffer(uint16) []byte               { panic("no abandonment") }
func (b *memExecBackend) Stale(uint16, OpID)                   {}
func (b *memExecBackend) Departed(uint16, OpID, MemberIO) bool { return false }
