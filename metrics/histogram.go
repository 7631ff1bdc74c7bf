package metrics

import (
	"sync/atomic"
	"time"
)

// NumBuckets is the number of buckets of every latency histogram: one per
// upper bound in BucketBounds plus the +Inf bucket.
const NumBuckets = 20

// bucketNanos are the inclusive upper bounds of the finite buckets, in
// nanoseconds: a 1-2-5 series from 10 µs to 10 s. Bucket i counts
// observations d with bucketNanos[i-1] < d <= bucketNanos[i]; the last
// bucket (index NumBuckets-1) counts everything above 10 s.
var bucketNanos = [NumBuckets - 1]int64{
	10e3, 20e3, 50e3, // 10, 20, 50 µs
	100e3, 200e3, 500e3, // 100, 200, 500 µs
	1e6, 2e6, 5e6, // 1, 2, 5 ms
	10e6, 20e6, 50e6, // 10, 20, 50 ms
	100e6, 200e6, 500e6, // 100, 200, 500 ms
	1e9, 2e9, 5e9, // 1, 2, 5 s
	10e9, // 10 s
}

// BucketBounds returns the finite upper bounds of the histogram buckets in
// seconds, as exported in the "le" label (the +Inf bucket is implied). The
// bounds are fixed: changing them changes the exported series.
func BucketBounds() [NumBuckets - 1]float64 {
	var b [NumBuckets - 1]float64
	for i, ns := range bucketNanos {
		b[i] = float64(ns) / 1e9
	}
	return b
}

// Histogram is a fixed-bucket latency histogram for the I/O path: Observe is
// a short scan of the bounds and two atomic adds, with no allocation, lock
// or system call. It is safe for any number of concurrent writers and
// readers; for the least cache-line traffic give each queue thread its own
// Histogram and add their snapshots together at scrape time.
//
// The zero value is ready to use. A Histogram must not be copied after first
// use.
type Histogram struct {
	_      noCopy
	counts [NumBuckets]atomic.Uint64
	sum    atomic.Uint64 // nanoseconds
}

// Observe records one duration. Negative durations count as zero.
func (h *Histogram) Observe(d time.Duration) {
	ns := int64(d)
	if ns < 0 {
		ns = 0
	}
	i := 0
	for i < len(bucketNanos) && ns > bucketNanos[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(uint64(ns))
}

// Snapshot returns the histogram's current counts. It never blocks Observe.
// Taken while observations are in progress, each bucket is exact at the
// moment it was read and the sum may include an observation whose bucket
// was read before it (or the reverse); the count is derived from the
// buckets, so it always equals the +Inf bucket as Prometheus requires.
func (h *Histogram) Snapshot() HistogramSnapshot {
	var s HistogramSnapshot
	for i := range h.counts {
		s.Buckets[i] = h.counts[i].Load()
	}
	s.SumNanos = h.sum.Load()
	return s
}

// HistogramSnapshot is a point-in-time copy of a Histogram. Buckets are not
// cumulative: Buckets[i] counts the observations that fell in bucket i only
// (see BucketBounds); Buckets[NumBuckets-1] counts those above the last
// bound. SumNanos is the sum of all observations in nanoseconds; it wraps
// after 2^64 ns (584 years of summed latency), which Prometheus's rate()
// treats as a counter reset.
type HistogramSnapshot struct {
	Buckets  [NumBuckets]uint64
	SumNanos uint64
}

// Count returns the number of observations.
func (s *HistogramSnapshot) Count() uint64 {
	var n uint64
	for _, c := range s.Buckets {
		n += c
	}
	return n
}

// Add adds o's observations to s (to merge per-queue histograms).
func (s *HistogramSnapshot) Add(o *HistogramSnapshot) {
	for i := range s.Buckets {
		s.Buckets[i] += o.Buckets[i]
	}
	s.SumNanos += o.SumNanos
}

// OpCounter counts one kind of member operation (say, reads on one member
// from one queue): operations, bytes, errors and latency. Like Histogram it
// is lock- and allocation-free, safe for concurrent use, and its zero value
// is ready; it must not be copied after first use. The engine may use it or
// keep its own counters and fill OpStats itself.
type OpCounter struct {
	ops     atomic.Uint64
	bytes   atomic.Uint64
	errors  atomic.Uint64
	Latency Histogram
}

// Done records one completed operation: it always counts the operation and
// its latency; bytes are counted only when the operation succeeded, and a
// failed one counts as an error.
func (c *OpCounter) Done(bytes uint64, d time.Duration, failed bool) {
	c.ops.Add(1)
	if failed {
		c.errors.Add(1)
	} else if bytes != 0 {
		c.bytes.Add(bytes)
	}
	c.Latency.Observe(d)
}

// Snapshot returns the counter's current values (see Histogram.Snapshot for
// what a snapshot taken during updates means).
func (c *OpCounter) Snapshot() OpStats {
	return OpStats{
		Ops:     c.ops.Load(),
		Bytes:   c.bytes.Load(),
		Errors:  c.errors.Load(),
		Latency: c.Latency.Snapshot(),
	}
}

// noCopy makes go vet's copylocks check flag copies of the structs that
// embed it.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
