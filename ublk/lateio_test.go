package ublk

import (
	"runtime"
	"sync/atomic"
	"testing"
)

type bufHandler struct{ buf []byte }

func (*bufHandler) Handle(*Request)            {}
func (*bufHandler) OnCompletion(uint64, int32) {}
func (*bufHandler) Close()                     {}

// A queue that ends with member I/O in flight keeps its handler (and the
// Go-heap buffers that I/O may still land in) from the garbage collector.
func TestQueueEndingWithIOInFlightKeepsHandler(t *testing.T) {
	var freed atomic.Bool
	func() {
		h := &bufHandler{buf: make([]byte, 1<<20)}
		runtime.AddCleanup(h, func(f *atomic.Bool) { f.Store(true) }, &freed)
		q := &Queue{handler: h, inflight: 1}
		q.finish()
	}()
	for range 5 {
		runtime.GC()
	}
	if freed.Load() {
		t.Fatal("the handler of a queue with member I/O in flight was collected: a late transfer would write into reused memory")
	}
}
