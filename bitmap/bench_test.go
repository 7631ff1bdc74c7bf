package bitmap

import (
	"sync/atomic"
	"testing"
	"time"
)

func benchBitmap(b *testing.B, regions int) *Bitmap {
	bm, a := newTestBitmap(b, regions, 4096, 1, InitDirty, Options{})
	a.flush(b, bm)
	return bm
}

// The hot path on a durable-dirty region, one queue thread.
func BenchmarkStartEndWrite(b *testing.B) {
	bm := benchBitmap(b, 65536)
	b.ReportAllocs()
	for b.Loop() {
		if !bm.StartWrite(100, 100, 1) {
			b.Fatal("waited")
		}
		bm.EndWrite(100, 100)
	}
}

// Many queue threads, each on its own regions (the usual case: random
// writes over a large array): no shared lock, so it scales.
func BenchmarkStartEndWriteParallel(b *testing.B) {
	bm := benchBitmap(b, 65536)
	var id atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := int(id.Add(1)) * 64 % 65536 // a cache line of words apart
		for pb.Next() {
			if !bm.StartWrite(r, r, 1) {
				b.Fatal("waited")
			}
			bm.EndWrite(r, r)
		}
	})
}

// Every queue thread on the same region: the worst case, one contended
// cache line (still no lock).
func BenchmarkStartEndWriteParallelSameRegion(b *testing.B) {
	bm := benchBitmap(b, 65536)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !bm.StartWrite(100, 100, 1) {
				b.Fatal("waited")
			}
			bm.EndWrite(100, 100)
		}
	})
}

// A flusher tick over 65,536 regions with nothing to clear.
func BenchmarkTick65536(b *testing.B) {
	bm := benchBitmap(b, 65536)
	var now time.Duration
	for b.Loop() {
		now += time.Millisecond
		if bm.Tick(now) != nil {
			b.Fatal("batch")
		}
	}
}

// The slow path: a write to a clean region, its batch (one block) and its
// release, then the clear (two flusher ticks over 4,080 regions), per
// iteration.
func BenchmarkWaitPrepareCommit(b *testing.B) {
	bm, _ := newTestBitmap(b, 4080, 4096, 1, InitClean, Options{ClearDelay: time.Nanosecond, MaxClearDelay: time.Nanosecond})
	var rel []Waiter
	var now time.Duration
	tick := func() {
		now += time.Second
		if bt := bm.Tick(now); bt != nil {
			rel = bm.Committed(bt, rel[:0])
		}
	}
	tick()
	b.ReportAllocs()
	for b.Loop() {
		if bm.StartWrite(100, 100, 1) {
			b.Fatal("did not wait")
		}
		bt := bm.Prepare()
		rel = bm.Committed(bt, rel[:0])
		if len(rel) != 1 {
			b.Fatal("not released")
		}
		bm.EndWrite(100, 100)
		tick() // sees the write
		tick() // clears
	}
}
