package array

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// hangRW is a memberIO rw whose I/O to one fd waits until released; the
// late read then fills its buffer with 0xAA, and a late write records
// what its buffer held.
type hangRW struct {
	mu      sync.Mutex
	path    string // the device that hangs ("": none)
	release chan struct{}
	late    chan []byte // what the late I/O saw or wrote
}

func newHangRW() *hangRW {
	return &hangRW{release: make(chan struct{}), late: make(chan []byte, 4)}
}

func (h *hangRW) hang(path string) {
	h.mu.Lock()
	h.path = path
	h.mu.Unlock()
}

func (h *hangRW) rw(d Device, p []byte, off int64, write bool) error {
	h.mu.Lock()
	hung := h.path != "" && d.Props().Path == h.path
	h.mu.Unlock()
	if !hung {
		return deviceRW(d, p, off, write)
	}
	<-h.release
	if !write {
		for i := range p {
			p[i] = 0xAA
		}
	}
	h.late <- bytes.Clone(p)
	return nil
}

func TestMemberIOTimeout(t *testing.T) {
	paths := memberFiles(t, 1, 4<<20)
	m, err := openMember(nil, paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a := &Array{Members: []*Member{m}, MemberTimeout: 50 * time.Millisecond}
	h := newHangRW()
	defer close(h.release)
	io := newMemberIO(a)
	io.rw = h.rw

	// Unhung: data goes through the bounce buffer both ways.
	want := alignedTestBuf(t, 8192)
	for i := range want {
		want[i] = byte(i * 7)
	}
	if err := io.WriteAt(0, want, 16); err != nil {
		t.Fatal(err)
	}
	got := alignedTestBuf(t, 8192)
	if err := io.ReadAt(0, got, 16); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back: err %v, equal %v", err, bytes.Equal(got, want))
	}
	if err := io.Flush(0); err != nil {
		t.Fatal(err)
	}

	// Hung: each operation fails after the timeout, and what the late I/O
	// does touches only its own buffer.
	h.hang(m.Path)
	start := time.Now()
	err = io.ReadAt(0, got, 16)
	if !errors.Is(err, errMemberTimeout) {
		t.Fatalf("hung read: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("hung read returned after %v", d)
	}
	if err := io.WriteAt(0, want, 16); !errors.Is(err, errMemberTimeout) {
		t.Fatalf("hung write: %v", err)
	}
	if err := io.Flush(0); !errors.Is(err, errMemberTimeout) {
		t.Fatalf("hung flush: %v", err)
	}
	// The syncer reuses its buffers at once.
	sent := bytes.Clone(want)
	for i := range want {
		want[i] = 0x55
	}
	for i := range got {
		got[i] = 0x11
	}
	h.release <- struct{}{} // the read
	if late := <-h.late; late[0] != 0xAA {
		t.Fatalf("late read saw %#x", late[0])
	}
	h.release <- struct{}{} // the write
	if late := <-h.late; !bytes.Equal(late, sent) {
		t.Fatal("the late write wrote the reused buffer, not the data it was given")
	}
	h.release <- struct{}{} // the flush
	<-h.late
	for i, c := range got {
		if c != 0x11 {
			t.Fatalf("the late read landed in the caller's buffer at %d", i)
		}
	}
}

// TestRebuildHungTarget: a rebuild whose target stops answering ends with
// the target failed instead of hanging, and StopSync returns.
func TestRebuildHungTarget(t *testing.T) {
	h := newHangRW()
	old := memberRW
	memberRW = h.rw
	defer func() { memberRW = old }()
	paths := memberFiles(t, 3, 32<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true,
		SyncMinBytes: 1 << 20, SyncMaxBytes: 1 << 20}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer close(h.release) // before Close: a job hung without the fix ends
	a.MemberTimeout = 100 * time.Millisecond
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(1, paths[2]); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	h.hang(a.Members[1].Path)
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.WaitSync(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the rebuild hangs on a member that does not answer")
	}
	if st := a.Status(); st.Members[1].State != "faulty" {
		t.Fatalf("hung rebuild target is %q, want faulty", st.Members[1].State)
	}
	a.StopSync()
}

func alignedTestBuf(t *testing.T, n int) []byte {
	t.Helper()
	b, err := (&bouncePool{}).get(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
