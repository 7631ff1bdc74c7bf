package ublk

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func newTestRing(t *testing.T, entries uint32, o RingOptions) *Ring {
	t.Helper()
	r, err := NewRing(entries, o)
	if err != nil {
		t.Skipf("io_uring unavailable on this host: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func reap(t *testing.T, r *Ring, n int) map[uint64]int32 {
	t.Helper()
	got := map[uint64]int32{}
	for len(got) < n {
		if err := r.WaitTimeout(5 * time.Second); err != nil {
			t.Fatalf("waiting for %d completions, have %v: %v", n, got, err)
		}
		for c := r.PeekCQE(); c != nil; c = r.PeekCQE() {
			got[c.UserData] = c.Res
			r.SeenCQE()
		}
	}
	return got
}

func TestRingNopRoundTrip(t *testing.T) {
	for _, o := range []RingOptions{{}, {SQE128: true}, {SingleIssuer: true, CQEntries: 64}} {
		runtime.LockOSThread()
		r := newTestRing(t, 8, o)
		for i := range 20 { // more than the ring holds: NextSQE must submit to make room
			s, err := r.NextSQE()
			if err != nil {
				t.Fatal(err)
			}
			PrepNop(s, uint64(100+i))
			if r.CQReady()+r.Pending() >= 8 {
				reap(t, r, int(r.CQReady()+r.Pending()))
			}
		}
		if _, err := r.SubmitAndWait(1); err != nil {
			t.Fatal(err)
		}
		for c := r.PeekCQE(); c != nil; c = r.PeekCQE() {
			if c.Res != 0 || c.UserData < 100 || c.UserData >= 120 {
				t.Fatalf("nop cqe %+v", *c)
			}
			r.SeenCQE()
		}
		runtime.UnlockOSThread()
	}
}

func TestRingGetSQEFull(t *testing.T) {
	r := newTestRing(t, 4, RingOptions{})
	for range r.SQEntries() {
		if r.GetSQE() == nil {
			t.Fatal("GetSQE returned nil before the queue was full")
		}
	}
	if r.GetSQE() != nil {
		t.Fatal("GetSQE returned an entry from a full queue")
	}
	if got := r.Space(); got != 0 {
		t.Fatalf("Space() = %d on a full queue", got)
	}
}

func TestRingFixedFileReadWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	r := newTestRing(t, 8, RingOptions{})
	if err := r.RegisterFiles([]int32{int32(f.Fd())}); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterBuffer(buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, bytes.Repeat([]byte("ublk"), 1024))
	s := r.GetSQE()
	PrepRW(s, OpWriteFixed, 0, buf[:4096], 4096, 1)
	s = r.GetSQE()
	PrepFsync(s, 0, FsyncDatasync, 2)
	s.Flags |= SQEIODrain
	got := reap(t, r, 2)
	if got[1] != 4096 || got[2] != 0 {
		t.Fatalf("write/fsync results %v", got)
	}
	s = r.GetSQE()
	PrepRW(s, OpRead, 0, buf[4096:], 4096, 3)
	if got := reap(t, r, 1); got[3] != 4096 {
		t.Fatalf("read result %v", got)
	}
	if !bytes.Equal(buf[:4096], buf[4096:]) {
		t.Fatal("read back different bytes")
	}
	onDisk, _ := os.ReadFile(path)
	if len(onDisk) != 8192 || !bytes.Equal(onDisk[4096:], buf[:4096]) {
		t.Fatalf("file holds %d bytes, want the block at 4096", len(onDisk))
	}
	s = r.GetSQE()
	PrepFallocate(s, 0, FallocPunchHole|FallocKeepSize, 4096, 4096, 4)
	if got := reap(t, r, 1); got[4] != 0 {
		t.Fatalf("punch hole result %v", got)
	}
	onDisk, _ = os.ReadFile(path)
	if !bytes.Equal(onDisk[4096:], make([]byte, 4096)) {
		t.Fatal("punched range does not read back as zeroes")
	}
}

// A sparse buffer table (zero copy: the ublk driver fills the slots) is
// taken, and a fixed read naming a slot nothing filled fails with EFAULT
// instead of reaching any memory.
func TestRingSparseBufferSlots(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	r := newTestRing(t, 8, RingOptions{})
	if err := r.RegisterFiles([]int32{int32(f.Fd())}); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterSparseBuffers(4); err != nil {
		t.Fatal(err)
	}
	s := r.GetSQE()
	PrepRWSlot(s, OpReadFixed, 0, 2, 0, 4096, 0, 1)
	if got := reap(t, r, 1); got[1] != -int32(unix.EFAULT) {
		t.Fatalf("fixed read of an empty slot: %d, want EFAULT", got[1])
	}
	s = r.GetSQE()
	PrepRWSlot(s, OpReadFixed, 0, 4, 0, 4096, 0, 2)
	if got := reap(t, r, 1); got[2] != -int32(unix.EFAULT) {
		t.Fatalf("fixed read past the table: %d, want EFAULT", got[2])
	}
}

// A fixed-file slot updated in place serves the new file; emptied, it
// fails requests with EBADF and no longer holds the old file.
func TestRingUpdateFile(t *testing.T) {
	dir := t.TempDir()
	open := func(name, data string) *os.File {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open("a", "aaaa"), open("b", "bbbb")
	r := newTestRing(t, 8, RingOptions{})
	if err := r.RegisterFiles([]int32{-1, int32(a.Fd())}); err != nil {
		t.Fatal(err)
	}
	read := func(ud uint64) (int32, string) {
		buf := make([]byte, 4)
		PrepRW(r.GetSQE(), OpRead, 1, buf, 0, ud)
		res := reap(t, r, 1)[ud]
		return res, string(buf)
	}
	if res, got := read(1); res != 4 || got != "aaaa" {
		t.Fatalf("slot 1 before the update: %d %q", res, got)
	}
	if err := r.UpdateFile(1, int(b.Fd())); err != nil {
		t.Fatal(err)
	}
	if res, got := read(2); res != 4 || got != "bbbb" {
		t.Fatalf("slot 1 after the update: %d %q", res, got)
	}
	if err := r.UpdateFile(1, -1); err != nil {
		t.Fatal(err)
	}
	if res, _ := read(3); res != -int32(unix.EBADF) {
		t.Fatalf("emptied slot: result %d, want -EBADF", res)
	}
	if err := r.UpdateFile(5, int(a.Fd())); err == nil {
		t.Fatal("a slot past the table was updated")
	}
}

func TestRingLinkTimeoutCancelsStuckOp(t *testing.T) {
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	r := newTestRing(t, 8, RingOptions{})
	if err := r.RegisterFiles([]int32{int32(p[0])}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	s := r.GetSQE()
	PrepRW(s, OpRead, 0, buf, ^uint64(0), 1) // a read from an empty pipe never completes
	s.Flags |= SQEIOLink
	r.PrepLinkTimeout(r.GetSQE(), 20*time.Millisecond, 2)
	got := reap(t, r, 2)
	runtime.KeepAlive(buf)
	if got[1] != -int32(unix.ECANCELED) || got[2] != -int32(unix.ETIME) {
		t.Fatalf("stuck read/timeout results %v, want -ECANCELED/-ETIME", got)
	}

	// A linked timeout that does not fire completes with -ECANCELED.
	s = r.GetSQE()
	PrepNop(s, 3)
	s.Flags |= SQEIOLink
	r.PrepLinkTimeout(r.GetSQE(), time.Second, 4)
	got = reap(t, r, 2)
	if got[3] != 0 || got[4] != -int32(unix.ECANCELED) {
		t.Fatalf("nop/timeout results %v, want 0/-ECANCELED", got)
	}
}

func TestRingWaitTimeout(t *testing.T) {
	r := newTestRing(t, 4, RingOptions{})
	start := time.Now()
	if err := r.WaitTimeout(30 * time.Millisecond); err != unix.ETIME {
		t.Fatalf("WaitTimeout on an idle ring = %v, want ETIME", err)
	}
	if time.Since(start) < 25*time.Millisecond {
		t.Fatal("WaitTimeout returned before its deadline")
	}
}

// TestRingWaitSurvivesSignals keeps a goroutine hammering the scheduler so
// the runtime preempts with SIGURG while the ring thread sleeps in
// io_uring_enter: waits must retry EINTR, not fail.
func TestRingWaitSurvivesSignals(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := newTestRing(t, 4, RingOptions{SingleIssuer: true})
	stop := make(chan struct{})
	defer close(stop)
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
					runtime.GC()
				}
			}
		}()
	}
	for i := range 20 {
		r.PrepTimeout(r.GetSQE(), 5*time.Millisecond, uint64(i))
		if _, err := r.SubmitAndWait(1); err != nil {
			t.Fatalf("SubmitAndWait: %v", err)
		}
		c := r.PeekCQE()
		if c == nil || c.UserData != uint64(i) || c.Res != -int32(unix.ETIME) {
			t.Fatalf("timeout cqe %+v", c)
		}
		r.SeenCQE()
	}
}

func TestMmapAligned(t *testing.T) {
	for _, n := range []int{4096, 5 << 19, 64 << 20, 3 << 12} {
		m, err := mmapAligned(n, hugePage, unix.PROT_READ|unix.PROT_WRITE)
		if err != nil {
			t.Fatal(err)
		}
		if p := uintptr(unsafe.Pointer(&m[0])); p%hugePage != 0 || len(m) != n || cap(m) != n {
			t.Fatalf("mmapAligned(%d): start %#x len %d cap %d", n, p, len(m), cap(m))
		}
		m[0], m[n-1] = 1, 2
		if err := munmapRaw(m); err != nil {
			t.Fatal(err)
		}
	}
}

// Spare tag buffers: when the registered spares are all taken (a hung
// member holds their reads), ReserveBuffer maps more; a tag swapped onto
// one is no longer in the registered buffer.
func TestQueueSpareBuffersGrow(t *testing.T) {
	const depth, maxIO, nspare = 2, 8192, 1
	mem, err := mmapAligned((depth+nspare)*maxIO, 4096, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		t.Fatal(err)
	}
	q := &Queue{depth: depth, maxIO: maxIO, bufMem: mem, nbuf: depth + nspare, fixedBufs: true,
		bufIdx: []int{0, 1}, spares: []int{2}, reqs: make([]Request, depth)}
	defer q.close()
	for i := range q.reqs {
		q.reqs[i].Buf = q.buf(i)
	}
	copy(q.reqs[1].Buf, "tag one data")
	var got []int
	for range 3 {
		b, ok := q.ReserveBuffer()
		if !ok {
			t.Fatal("ReserveBuffer failed")
		}
		got = append(got, b)
	}
	if got[0] != 2 || got[1] != 3 || got[2] != 4 || len(q.extra) != 2 {
		t.Fatalf("buffers %v, %d mapped", got, len(q.extra))
	}
	if !q.TagFixed(1) {
		t.Fatal("a tag on its own buffer is not fixed")
	}
	old := q.SwapBuffer(1, got[1], 12)
	if old != 1 || q.TagFixed(1) || string(q.reqs[1].Buf[:12]) != "tag one data" || &q.reqs[1].Buf[0] != &q.extra[0][0] {
		t.Fatalf("after the swap: old %d fixed %v data %q", old, q.TagFixed(1), q.reqs[1].Buf[:12])
	}
	q.ReleaseBuffer(old)
	if b, _ := q.ReserveBuffer(); b != old {
		t.Fatalf("a released buffer was not reused: got %d", b)
	}
}
