package bitmap

import (
	"math/rand/v2"
	"testing"
	"time"
)

// hysteresisSim drives a bitmap with a clock: Tick every TickInterval,
// writes at given times, each completing at once (a waiting write is
// released by flushing right away).
type hysteresisSim struct {
	t     *testing.T
	b     *Bitmap
	a     *fakeArray
	now   time.Duration
	next  time.Duration // next tick
	waits int
}

func newHysteresisSim(t *testing.T, regions int, opts Options) *hysteresisSim {
	b, a := newTestBitmap(t, regions, 4096, 2, InitClean, opts)
	s := &hysteresisSim{t: t, b: b, a: a}
	a.tick(t, b, 0)
	s.next = b.TickInterval()
	return s
}

// advance runs the ticks up to time at.
func (s *hysteresisSim) advance(at time.Duration) {
	for s.next <= at {
		s.a.tick(s.t, s.b, s.next)
		s.next += s.b.TickInterval()
	}
	s.now = at
}

// write writes region r at time at.
func (s *hysteresisSim) write(at time.Duration, r int) {
	s.advance(at)
	if !s.b.StartWrite(r, r, Waiter(r)) {
		s.waits++
		if rel := s.a.flush(s.t, s.b); len(rel) != 1 {
			s.t.Fatalf("released %v", rel)
		}
	}
	s.b.EndWrite(r, r)
}

// A region revisited periodically, at intervals around the clear delay and
// up to the maximum delay, stops costing bitmap writes after a few
// clear-and-set cycles (log2(T/ClearDelay)+1 at most), and stays dirty.
func TestHysteresisPeriodic(t *testing.T) {
	const d = 5 * time.Second
	for _, period := range []time.Duration{3 * time.Second, 4500 * time.Millisecond, 5500 * time.Millisecond, 7 * time.Second, 9 * time.Second, 12 * time.Second, 20 * time.Second, 40 * time.Second, 90 * time.Second, 150 * time.Second} {
		s := newHysteresisSim(t, 100, Options{ClearDelay: d})
		const revisits = 200
		before := s.b.Stats()
		var firstHalf int
		for k := range revisits {
			s.write(time.Duration(k)*period, 7)
			if k == revisits/2 {
				firstHalf = s.waits
			}
		}
		after := s.b.Stats()
		bound := 2
		for x := d; x < period; x <<= 1 {
			bound++
		}
		if s.waits > bound || s.waits != firstHalf {
			t.Errorf("period %v: %d waits (%d in the first half), want at most %d, none in the second half", period, s.waits, firstHalf, bound)
		}
		if w := after.BlockWrites - before.BlockWrites; w > uint64(2*bound) {
			t.Errorf("period %v: %d bitmap block writes for %d revisits", period, w, revisits)
		}
		t.Logf("period %v: %d waits, %d bitmap block writes over %d revisits; delay now %v", period, s.waits, after.BlockWrites-before.BlockWrites, revisits, s.b.delay(7))
	}
}

// A region revisited less often than MaxClearDelay is cleared in between
// (at most one clear-and-set per MaxClearDelay); its delay does not grow.
func TestHysteresisBeyondMax(t *testing.T) {
	const d = 5 * time.Second
	s := newHysteresisSim(t, 100, Options{ClearDelay: d, MaxClearDelay: time.Minute})
	for k := range 50 {
		s.write(time.Duration(k)*2*time.Minute, 7)
	}
	if s.waits != 50 || s.b.delay(7) != d {
		t.Fatalf("%d waits, delay %v", s.waits, s.b.delay(7))
	}
}

// Without the back-off (MaxClearDelay = ClearDelay) the same workload
// costs a wait and two block writes per revisit forever: md's cliff.
func TestHysteresisBaselineCliff(t *testing.T) {
	const d = 5 * time.Second
	s := newHysteresisSim(t, 100, Options{ClearDelay: d, MaxClearDelay: d})
	for k := range 100 {
		s.write(time.Duration(k)*7*time.Second, 7)
	}
	if s.waits < 99 {
		t.Fatalf("%d waits over 100 revisits without hysteresis; the baseline should wait every time", s.waits)
	}
}

// A random workload over many regions revisiting each about every clear
// delay (exponential gaps): the wait rate decays to almost nothing.
func TestHysteresisRandom(t *testing.T) {
	const (
		d       = 5 * time.Second
		regions = 500
		writes  = 100000
	)
	s := newHysteresisSim(t, regions, Options{ClearDelay: d})
	rng := rand.New(rand.NewPCG(1, 2))
	rate := float64(regions) / d.Seconds() // one revisit per region per d on average
	at := time.Duration(0)
	var quarter [4]int
	for i := range writes {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		w := s.waits
		s.write(at, rng.IntN(regions))
		quarter[i*4/writes] += s.waits - w
	}
	t.Logf("waits per quarter of %d writes: %v; bitmap block writes %d", writes/4, quarter, s.b.Stats().BlockWrites)
	if quarter[3] > writes/4/100 || quarter[3]*10 > quarter[0] {
		t.Fatalf("waits per quarter %v: the last quarter should be under 1%% of writes and a tenth of the first", quarter)
	}
}

// Regions written once are cleared about ClearDelay after their last
// write; a region whose delay backed off is cleared after the longer
// delay, and after a long quiet spell it comes back down.
func TestHysteresisClearsIdle(t *testing.T) {
	const d = 5 * time.Second
	s := newHysteresisSim(t, 100, Options{ClearDelay: d})
	s.write(time.Second, 1)
	s.advance(time.Second + d - time.Second)
	if s.b.State(1) != Dirty {
		t.Fatal("cleared before the delay")
	}
	s.advance(time.Second + d + 2*time.Second)
	if s.b.State(1) != Clean {
		t.Fatal("not cleared about ClearDelay after the write")
	}
	// Re-dirtied soon after the clear: the delay doubles.
	s.write(10*time.Second, 1)
	if s.b.delay(1) != 2*d {
		t.Fatalf("delay %v after a quick re-dirty", s.b.delay(1))
	}
	s.advance(10*time.Second + 2*d + 2*time.Second)
	if s.b.State(1) != Clean {
		t.Fatal("not cleared after the doubled delay")
	}
	// Quiet for longer than the maximum delay: back down a level.
	s.write(10*time.Second+2*d+2*time.Second+DefaultMaxClearDelay+time.Second, 1)
	if s.b.delay(1) != d {
		t.Fatalf("delay %v after a long quiet spell, want %v", s.b.delay(1), d)
	}
	if st := s.b.Stats(); st.Redirtied != 1 || st.Cleared != 2 {
		t.Fatalf("stats %+v", st)
	}
}
