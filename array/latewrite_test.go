package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// fakeRing is a ring whose member operations wait until the test
// completes them, with a clock the test moves.
type fakeRing struct {
	now     time.Time
	bufs    [][]byte
	pending []fakeOp
	done    map[uint16]error
}

type fakeOp struct {
	ud   uint64
	io   engine.MemberIO
	data []byte
	m    *Member // the member it went to
}

func (r *fakeRing) ID() int                       { return 0 }
func (r *fakeRing) Depth() int                    { return 4 }
func (r *fakeRing) MaxIOBytes() int               { return 64 << 10 }
func (r *fakeRing) Now() time.Time                { return r.now }
func (r *fakeRing) Wake()                         {}
func (r *fakeRing) SetTargetFile(i, fd int) error { return nil }
func (r *fakeRing) Complete(tag uint16, err error) {
	r.done[tag] = err
}
func (r *fakeRing) ZeroCopy() bool { return false }
func (r *fakeRing) ReserveBuffer() (int, bool) {
	r.bufs = append(r.bufs, make([]byte, 64<<10))
	return len(r.bufs) - 1, true
}
func (r *fakeRing) SwapBuffer(tag uint16, spare, n int) int { return spare }
func (r *fakeRing) ReleaseBuffer(b int)                     {}
func (r *fakeRing) Buffer(tag uint16) []byte                { return r.bufs[len(r.bufs)-1] }
func (r *fakeRing) Fail(err error)                          { panic(err) }

func (r *fakeRing) SubmitMember(ud uint64, tag uint16, m *Member, fixed bool, io engine.MemberIO, off uint64, data []byte) error {
	r.pending = append(r.pending, fakeOp{ud, io, data, m})
	return nil
}

// A write given up after the member timeout on the last in-sync copy
// (kept: md never fails it) may still be carried out by the device. Until
// it returns no other write goes to that member: the device could carry
// the late one out after the newer one and undo it. (The array model
// found this: a late write-zeroes landed over a write acknowledged after
// it, and a rebuild copied the zeroes.) Nor is it read: a late write
// landing after the read would change its answer with no write between.
func TestLateWriteFencesMember(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	a.MemberTimeout = 10 * time.Second
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	write := func(tag uint16) {
		buf := make([]byte, 4096)
		h.Handle(&ublk.Request{Tag: tag, Op: ublk.IOOpWrite, Sector: 0, Sectors: 8, Buf: buf})
	}
	write(0)
	if len(r.pending) != 1 || r.pending[0].io.Member != 0 {
		t.Fatalf("write planned as %+v", r.pending)
	}
	hung := r.pending[0]
	r.pending = nil
	r.now = r.now.Add(11 * time.Second)
	h.OnTick()
	if err, ok := r.done[0]; !ok || err == nil {
		t.Fatalf("the hung write: done %v, err %v (want an error)", ok, err)
	}
	if s := a.Engine.State().Members[0].State; s != engine.MemberActive {
		t.Fatalf("the last in-sync copy was failed: %v", s)
	}
	write(1)
	if len(r.pending) != 0 {
		t.Fatalf("a write went to a member with a given-up write still out: %+v", r.pending)
	}
	if err, ok := r.done[1]; !ok || err == nil {
		t.Fatalf("write behind the late one: done %v, err %v (want an error)", ok, err)
	}
	h.Handle(&ublk.Request{Tag: 3, Op: ublk.IOOpRead, Sector: 0, Sectors: 8, Buf: make([]byte, 4096)})
	if len(r.pending) != 0 {
		t.Fatalf("a read went to a member with a given-up write still out: %+v", r.pending)
	}
	if err, ok := r.done[3]; !ok || err == nil {
		t.Fatalf("read behind the late write: done %v, err %v (want an error: the late write may still change the answer)", ok, err)
	}
	// The late write returns: the member takes writes again.
	h.OnCompletion(hung.ud, 4096)
	write(2)
	if len(r.pending) != 1 {
		t.Fatalf("after the late write returned: planned %+v", r.pending)
	}
	o := r.pending[0]
	h.OnCompletion(o.ud, 4096)
	if err, ok := r.done[2]; !ok || err != nil {
		t.Fatalf("write after the late one returned: done %v, err %v", ok, err)
	}
}
