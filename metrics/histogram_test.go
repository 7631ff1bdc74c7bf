package metrics

import (
	"sync"
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	cases := []struct {
		d      time.Duration
		bucket int
	}{
		{-time.Second, 0},
		{0, 0},
		{10 * time.Microsecond, 0}, // bounds are inclusive, as "le" says
		{10*time.Microsecond + 1, 1},
		{20 * time.Microsecond, 1},
		{999 * time.Microsecond, 6},
		{time.Millisecond, 6},
		{time.Second, 15},
		{10 * time.Second, NumBuckets - 2},
		{10*time.Second + 1, NumBuckets - 1},
		{time.Hour, NumBuckets - 1},
	}
	for _, c := range cases {
		var h Histogram
		h.Observe(c.d)
		s := h.Snapshot()
		for i, n := range s.Buckets {
			want := uint64(0)
			if i == c.bucket {
				want = 1
			}
			if n != want {
				t.Errorf("Observe(%v): bucket %d = %d, want %d", c.d, i, n, want)
			}
		}
		wantSum := uint64(max(c.d, 0))
		if s.SumNanos != wantSum {
			t.Errorf("Observe(%v): sum = %d, want %d", c.d, s.SumNanos, wantSum)
		}
	}
}

func TestBucketBounds(t *testing.T) {
	b := BucketBounds()
	if b[0] != 10e-6 || b[len(b)-1] != 10 {
		t.Fatalf("bounds %v: want 10µs..10s", b)
	}
	for i := 1; i < len(b); i++ {
		if !(b[i] > b[i-1]) {
			t.Fatalf("bounds not increasing at %d: %v", i, b)
		}
	}
}

func TestHistogramObserveAllocs(t *testing.T) {
	var h Histogram
	d := 37 * time.Microsecond
	if n := testing.AllocsPerRun(1000, func() { h.Observe(d); d += time.Microsecond }); n != 0 {
		t.Fatalf("Observe allocates %v times per call", n)
	}
	var c OpCounter
	if n := testing.AllocsPerRun(1000, func() { c.Done(4096, d, false) }); n != 0 {
		t.Fatalf("OpCounter.Done allocates %v times per call", n)
	}
}

// TestHistogramConcurrent runs writers and a reader at once (meaningful
// under -race): nothing is lost, and counts never go back.
func TestHistogramConcurrent(t *testing.T) {
	const writers, per = 8, 5000
	var h Histogram
	var c OpCounter
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := h.Snapshot()
			n := s.Count()
			if n < last {
				t.Errorf("count went back from %d to %d", last, n)
				return
			}
			last = n
			_ = c.Snapshot() // races with Done: -race checks it is atomic
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				d := time.Duration(w*per+i) * time.Microsecond
				h.Observe(d)
				c.Done(512, d, i%10 == 0)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-readerDone

	s := h.Snapshot()
	if got := s.Count(); got != writers*per {
		t.Fatalf("count = %d, want %d", got, writers*per)
	}
	var wantSum uint64
	for i := range uint64(writers * per) {
		wantSum += i * 1000
	}
	if s.SumNanos != wantSum {
		t.Fatalf("sum = %d, want %d", s.SumNanos, wantSum)
	}
	o := c.Snapshot()
	if o.Ops != writers*per || o.Errors != writers*per/10 || o.Bytes != 512*(writers*per-writers*per/10) {
		t.Fatalf("OpCounter = %d ops, %d errors, %d bytes", o.Ops, o.Errors, o.Bytes)
	}
	if o.Latency != s {
		t.Fatalf("OpCounter latency %+v != histogram %+v", o.Latency, s)
	}
}

func TestSnapshotAdd(t *testing.T) {
	var a, b OpCounter
	a.Done(4096, time.Millisecond, false)
	b.Done(8192, 3*time.Millisecond, false)
	b.Done(0, time.Minute, true)
	sa, sb := a.Snapshot(), b.Snapshot()
	sa.Add(&sb)
	if sa.Ops != 3 || sa.Bytes != 12288 || sa.Errors != 1 || sa.Latency.Count() != 3 ||
		sa.Latency.SumNanos != uint64(4*time.Millisecond+time.Minute) ||
		sa.Latency.Buckets[6] != 1 || sa.Latency.Buckets[8] != 1 || sa.Latency.Buckets[NumBuckets-1] != 1 {
		t.Fatalf("merged = %+v", sa)
	}
}

func BenchmarkHistogramObserve(b *testing.B) {
	var h Histogram
	for i := 0; b.Loop(); i++ {
		h.Observe(time.Duration(i&0xffff) * time.Microsecond)
	}
}
