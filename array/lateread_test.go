package array

import (
	"bytes"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// bufRing is a fakeRing with tag buffers as ublk.Queue keeps them: a
// tag's buffer changes with SwapBuffer, spares come back with
// ReleaseBuffer.
type bufRing struct {
	*fakeRing
	bufIdx []int
	spares []int
	// committed: each completed tag's buffer as the kernel copies it at
	// the commit.
	committed map[uint16][]byte
}

func newBufRing() *bufRing {
	r := &bufRing{fakeRing: &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}, committed: map[uint16][]byte{}}
	for tag := range r.Depth() {
		r.bufs = append(r.bufs, make([]byte, r.MaxIOBytes()))
		r.bufIdx = append(r.bufIdx, tag)
	}
	return r
}

func (r *bufRing) ReserveBuffer() (int, bool) {
	if n := len(r.spares); n > 0 {
		b := r.spares[n-1]
		r.spares = r.spares[:n-1]
		return b, true
	}
	r.bufs = append(r.bufs, make([]byte, r.MaxIOBytes()))
	return len(r.bufs) - 1, true
}

func (r *bufRing) SwapBuffer(tag uint16, spare, n int) int {
	copy(r.bufs[spare][:n], r.bufs[r.bufIdx[tag]][:n])
	old := r.bufIdx[tag]
	r.bufIdx[tag] = spare
	return old
}

func (r *bufRing) Buffer(tag uint16) []byte { return r.bufs[r.bufIdx[tag]] }
func (r *bufRing) ReleaseBuffer(b int)      { r.spares = append(r.spares, b) }
func (r *bufRing) Complete(tag uint16, err error) {
	r.fakeRing.Complete(tag, err)
	r.committed[tag] = bytes.Clone(r.Buffer(tag))
}

// A read given up after the member timeout that lands late (a failing
// read scribbling its buffer, or DMA) must not change the answer of its
// request: its retry went to another buffer, and the request answers
// with that one, whatever lands in the old one before or after the
// request completes. The old buffer is reused only once the late read is
// back. (The array model found the late read's garbage answered: the
// retry had gone into the same buffer.)
func TestLateReadKeepsRetryData(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 10 * time.Second
	r := newBufRing()
	h := a.newQueue(r)
	h.exec.(*engine.Executor).Inflight()[1] = 1 << 30 // the read goes to member 0, which hangs
	const tag = 1
	want := bytes.Repeat([]byte{'r'}, 16<<9)
	h.Handle(&ublk.Request{Tag: tag, Op: ublk.IOOpRead, Sector: 0, Sectors: 16, Buf: r.Buffer(tag)})
	if len(r.pending) != 1 || r.pending[0].io.Member != 0 {
		t.Fatalf("read planned as %+v", r.pending)
	}
	hung := r.pending[0]
	r.pending = nil
	r.now = r.now.Add(11 * time.Second)
	h.OnTick()
	if len(r.pending) == 0 {
		t.Fatal("the read given up was not retried")
	}
	retries := r.pending
	r.pending = nil
	// The first retry lands, then the read given up fails late,
	// scribbling its buffer, then the other retries land.
	for i, o := range retries {
		if o.io.Member != 1 {
			t.Fatalf("retry on member %d", o.io.Member)
		}
		if &o.data[0] == &r.bufs[tag][o.io.BufOff] {
			t.Fatal("a retry reads into the buffer the read given up may still land in")
		}
		copy(o.data, want[o.io.BufOff:])
		h.OnCompletion(o.ud, int32(len(o.data)))
		if i == 0 {
			for j := range hung.data {
				hung.data[j] = 0xa5
			}
			h.OnCompletion(hung.ud, -5)
		}
	}
	if err, ok := r.done[tag]; !ok || err != nil {
		t.Fatalf("read: done %v, err %v", ok, err)
	}
	if got := r.committed[tag][:16<<9]; !bytes.Equal(got, want) {
		t.Fatalf("read answered %x..., want %x...", got[:8], want[:8])
	}
	// The late read is back and the request completed: the old buffer
	// is free again, the tag keeps the one it answered with.
	if len(h.held) != 0 || len(h.quarantine) != 0 || len(r.spares) != 1 || r.spares[0] != tag || r.bufIdx[tag] == tag {
		t.Fatalf("after the late read: held %v, quarantine %v, spares %v, tag buffer %d", h.held, h.quarantine, r.spares, r.bufIdx[tag])
	}

	// A read given up whose late result comes after its request
	// completed: the old buffer waits for it.
	clear(r.done)
	h.Handle(&ublk.Request{Tag: tag, Op: ublk.IOOpRead, Sector: 0, Sectors: 8, Buf: r.Buffer(tag)})
	if len(r.pending) != 1 || r.pending[0].io.Member != 1 {
		t.Fatalf("read planned as %+v", r.pending)
	}
	hung = r.pending[0]
	r.pending = nil
	before := r.bufIdx[tag]
	r.now = r.now.Add(11 * time.Second)
	h.OnTick()
	// Member 0 is failed: the read given up on the last copy fails.
	if err, ok := r.done[tag]; !ok || err == nil {
		t.Fatalf("read given up on the last copy: done %v, err %v", ok, err)
	}
	if r.bufIdx[tag] == before || len(h.held) != 1 || h.held[0].buf != before || h.held[0].open {
		t.Fatalf("after completion with a read given up out: tag buffer %d (was %d), held %v", r.bufIdx[tag], before, h.held)
	}
	for _, b := range r.spares {
		if b == before {
			t.Fatal("the buffer a late read may land in is a spare again")
		}
	}
	h.OnCompletion(hung.ud, 4096)
	if len(h.held) != 0 || len(h.quarantine) != 0 || r.spares[len(r.spares)-1] != before {
		t.Fatalf("after the late read: held %v, quarantine %v, spares %v", h.held, h.quarantine, r.spares)
	}
}
