package ublk

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestBatchBufferRing checks the provided-buffer ring the batch fetch
// uses, with reads that select their buffer from it (the multishot fetch
// needs a ublk device): every buffer is taken in turn, its id comes back
// in the CQE, the data lands in it, and a buffer given back is taken again.
func TestBatchBufferRing(t *testing.T) {
	r := newTestRing(t, 16, RingOptions{})
	const depth = 4
	q := &Queue{depth: depth, ring: r, zeroCopy: true}
	b, err := newBatchQueue(q)
	if err != nil {
		t.Skipf("provided-buffer rings unavailable on this host: %v", err)
	}
	defer b.close()
	if b.elemBytes != 8 || b.tagBuf != 2*depth || len(b.pbufs) != depth {
		t.Fatalf("elemBytes %d tagBuf %d entries %d", b.elemBytes, b.tagBuf, len(b.pbufs))
	}
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	read := func(i int) (bid uint16, data []byte) {
		t.Helper()
		msg := []byte{byte(i), byte(i + 1)}
		if _, err := unix.Write(p[1], msg); err != nil {
			t.Fatal(err)
		}
		s := r.GetSQE()
		s.Opcode = OpRead
		s.Fd = int32(p[0])
		s.Flags = SQEBufferSelect
		s.BufIndex = fetchGroup
		s.Len = uint32(b.tagBuf)
		s.Off = ^uint64(0) // current position (a pipe)
		s.UserData = uint64(i)
		if err := r.WaitTimeout(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		c := r.PeekCQE()
		res, flags := c.Res, c.Flags
		r.SeenCQE()
		if res != 2 || flags&cqeFBuffer == 0 {
			t.Fatalf("read %d: res %d flags %#x", i, res, flags)
		}
		bid = uint16(flags >> cqeBufferShift)
		data = unsafe.Slice(&b.tagMem[int(bid)*b.tagBuf], 2)
		if data[0] != msg[0] || data[1] != msg[1] {
			t.Fatalf("read %d: buffer %d holds %v, want %v", i, bid, data, msg)
		}
		return bid, data
	}
	seen := map[uint16]bool{}
	for i := range depth {
		bid, _ := read(i)
		if seen[bid] || int(bid) >= depth {
			t.Fatalf("read %d took buffer %d (taken before: %v)", i, bid, seen)
		}
		seen[bid] = true
	}
	// Every buffer is out: the next read finds none until one is given back.
	b.provide(2)
	if bid, _ := read(depth); bid != 2 {
		t.Fatalf("after giving back buffer 2 the read took %d", bid)
	}
}

// A fetch completion is bounded before its tags are read: a buffer id
// past the buffer ring, or more bytes than a tag buffer holds, fails the
// queue (a protocol error) instead of reading outside the buffers.
func TestBatchFetchCQEBounded(t *testing.T) {
	for name, c := range map[string]struct {
		bid uint16
		res int32
	}{"buffer id past the ring": {bid: 4, res: 2}, "more bytes than a tag buffer": {bid: 0, res: 2*4 + 2}} {
		r := newTestRing(t, 16, RingOptions{})
		const depth = 4
		q := &Queue{depth: depth, ring: r, zeroCopy: true, state: []uint8{tagFetched, tagFetched, tagFetched, tagFetched}}
		b, err := newBatchQueue(q)
		if err != nil {
			t.Skipf("provided-buffer rings unavailable on this host: %v", err)
		}
		q.batch = b
		q.onBatchCQE(batchFetch, c.res, cqeFBuffer|uint32(c.bid)<<cqeBufferShift|cqeFMore)
		b.close()
		if q.err == nil {
			t.Errorf("%s (buffer %d, %d bytes): taken", name, c.bid, c.res)
		}
	}
}
