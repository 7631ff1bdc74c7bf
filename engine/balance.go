package engine

import "time"

// Balance is the read balancer of one queue (the Executor's): no sharing
// between queue threads, no locks, no allocation in Pick.
//
// Among the eligible copies of a piece it picks, in this order:
//
//  1. Copies on members not marked write-mostly; a write-mostly member is
//     read only when it holds the only eligible copy.
//  2. The member a sequential stream is on: if the piece starts where the
//     last read picked on member m ended, m keeps the stream while the
//     stream is shorter than Window sectors and m's load is at most twice
//     the least loaded candidate's.
//  3. The least loaded member, load being the expected time to serve the
//     piece: (sectors in flight on this queue + the piece) × the member's
//     measured service time per sector. Ties go to fewer sectors in flight,
//     then to the first copy.
//
// Service time is an EWMA of samples taken from completed reads (Complete),
// measured like dm-mpath's historical-service-time selector: from the later
// of the read's submission and the member's previous completion, so a read
// that waited behind others on a serialising member counts only its own
// service, not its queueing (that is what the in-flight factor already
// predicts). On a mirror of a fast and a slow member, the loads even out
// when each member's share of in-flight reads is proportional to its speed.
//
// The EWMA weighs a sample by the time since the member's previous
// completion (at least 1/16, all of it after ewmaSpan): a busy member's
// estimate is smoothed over many reads, while the sample of a member read
// only now and then replaces its estimate, so one slow outlier on a rarely
// used member is not remembered for long. A member idle for ProbeAfter
// since its last completion counts as free once: it gets the next read (a
// probe) and a fresh estimate, so a member once slow, or slow once, is
// retried instead of being shunned forever.
//
// Without timing (no Tick call) the service time is unknown and load is the
// sectors in flight: the old LeastLoaded policy.
type Balance struct {
	// Inflight is sectors in flight per member on this queue, maintained by
	// the executor (submit adds, completion subtracts).
	Inflight []int64
	// WriteMostly is a bit mask of members read only when no other copy is
	// eligible.
	WriteMostly uint64
	// Window is the sequential stream length, in sectors, kept on one
	// member (0: no stream affinity).
	Window uint64
	// ProbeAfter: see the type comment (0: no probes).
	ProbeAfter time.Duration

	timed    bool
	now      time.Duration
	svc      []float64       // EWMA of ns per sector; 0: no sample yet
	lastDone []time.Duration // per member: time of the last completed read
	next     []uint64        // per member: member sector after the last read picked
	run      []uint64        // per member: length of the stream ending at next
}

// Balancer tuning defaults.
const (
	// DefaultSeqWindow is the stream window when the array advertises no
	// io_opt (raid1): 1 MiB.
	DefaultSeqWindow = 2048
	// DefaultProbeAfter is how long an idle member goes unprobed: at QD1 on
	// a mirror whose other member is 10x faster, probes cost about 1%.
	DefaultProbeAfter = time.Second
	// A sample moves the estimate by (time since the member's previous
	// completion)/ewmaSpan of the difference, at least ewmaMinWeight.
	ewmaSpan      = 50 * time.Millisecond
	ewmaMinWeight = 1.0 / 16
)

// NewBalance returns a balancer for an array of g's geometry, with the
// stream window at io_opt (one full data stripe when that is a power of
// two) or DefaultSeqWindow.
func NewBalance(g Geometry) *Balance {
	b := &Balance{}
	b.init(g)
	return b
}

func (b *Balance) init(g Geometry) {
	n := g.Members
	b.Inflight = make([]int64, n)
	b.svc = make([]float64, n)
	b.lastDone = make([]time.Duration, n)
	b.next = make([]uint64, n)
	b.run = make([]uint64, n)
	b.Window = DefaultSeqWindow
	if w := g.DataStripeSectors(); g.Level == Level10 && w&(w-1) == 0 && w >= g.ChunkSectors {
		b.Window = w
	}
	b.ProbeAfter = DefaultProbeAfter
	for i := range b.next {
		b.next[i] = ^uint64(0)
	}
}

// Tick tells the balancer the current time (the executor calls it before
// planning a timed read); from the first call on, picks weigh load by the
// measured service times.
func (b *Balance) Tick(now time.Duration) {
	b.timed = true
	b.now = now
}

// Complete records a successful read of sectors on member m submitted at
// start and completed at now.
func (b *Balance) Complete(m int, sectors uint32, start, now time.Duration) {
	prev := b.lastDone[m]
	from := max(start, prev)
	b.lastDone[m] = max(now, prev)
	if sectors == 0 {
		return
	}
	sample := float64(max(now-from, 0)) / float64(sectors)
	w := min(max(float64(now-prev)/float64(ewmaSpan), ewmaMinWeight), 1)
	if b.svc[m] == 0 {
		w = 1
	}
	b.svc[m] += (sample - b.svc[m]) * w
	if b.svc[m] == 0 {
		b.svc[m] = 1e-3 // a sample, if a tiny one: not "unknown"
	}
}

// ServiceTime returns member m's estimated service time per sector (0:
// no sample yet).
func (b *Balance) ServiceTime(m int) time.Duration { return time.Duration(b.svc[m]) }

// load is the expected cost of adding sectors to member m's queue; guess
// stands in for a service time not measured yet.
func (b *Balance) load(m int, sectors uint32, guess float64) float64 {
	q := float64(b.Inflight[m] + int64(sectors))
	if !b.timed {
		return q
	}
	if b.ProbeAfter > 0 && b.Inflight[m] == 0 && b.now-b.lastDone[m] > b.ProbeAfter {
		return 0 // probe
	}
	s := b.svc[m]
	if s == 0 {
		s = guess
	}
	return q * s
}

// Pick implements Balancer.
func (b *Balance) Pick(locs []Location, ok uint32, sectors uint32) int {
	if b.WriteMostly != 0 {
		var rd uint32
		for i, l := range locs {
			if b.WriteMostly&(1<<uint(l.Member)) == 0 {
				rd |= 1 << uint(i)
			}
		}
		if ok&rd != 0 {
			ok &= rd
		}
	}
	// A member not measured yet is guessed as fast as the fastest measured
	// candidate: tried soon, but not flooded as if it were free.
	var guess float64
	if b.timed {
		for i, l := range locs {
			if s := b.svc[l.Member]; ok&(1<<uint(i)) != 0 && s > 0 && (guess == 0 || s < guess) {
				guess = s
			}
		}
	}
	best, seq := -1, -1
	var bestLoad, seqLoad float64
	for i, l := range locs {
		if ok&(1<<uint(i)) == 0 {
			continue
		}
		m := l.Member
		ld := b.load(m, sectors, guess)
		if best < 0 || ld < bestLoad || (ld == bestLoad && b.Inflight[m] < b.Inflight[locs[best].Member]) {
			best, bestLoad = i, ld
		}
		if seq < 0 && l.Sector == b.next[m] && b.run[m] < b.Window {
			seq, seqLoad = i, ld
		}
	}
	if seq >= 0 && seqLoad <= 2*bestLoad {
		best = seq
	}
	l := locs[best]
	if l.Sector == b.next[l.Member] {
		b.run[l.Member] += uint64(sectors)
	} else {
		b.run[l.Member] = uint64(sectors)
	}
	b.next[l.Member] = l.Sector + uint64(sectors)
	return best
}
