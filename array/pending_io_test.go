package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// pumped runs f while the test plays the queue thread (h.OnWake syncs its
// fixed files, which Remove and a re-add wait for).
func pumped(h *queue, f func() error) error {
	res := make(chan error, 1)
	go func() { res <- f() }()
	for {
		select {
		case err := <-res:
			return err
		case <-time.After(5 * time.Millisecond):
			h.OnWake()
		}
	}
}

// outWrite has h write 4 KiB at sector 0 of a two-member raid1 and
// returns the operation member 0 hangs on (the other returned).
func outWrite(t *testing.T, h *queue, r *fakeRing) fakeOp {
	t.Helper()
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 0, Sectors: 8, Buf: make([]byte, 4096)})
	if len(r.pending) != 2 {
		t.Fatalf("write planned as %+v", r.pending)
	}
	var hung fakeOp
	for _, o := range r.pending {
		if o.io.Member == 0 {
			hung = o
		} else {
			h.OnCompletion(o.ud, 4096)
		}
	}
	r.pending = nil
	return hung
}

// Found by review. A write still out on a member failed by hand, not yet
// given up at the member timeout, let the member be removed (only given-up
// I/O counted) and the device be re-added: the next writes went to it
// while the old write could still land after them, undoing acknowledged
// writes. Given up, it counted in the old Member's lateWrites, which the
// re-added device's new Member never looked at. As md refuses to remove a
// device with I/O pending (nr_pending: EBUSY), remove is refused while any
// operation is out on the device, and allowed once it returned. (A
// re-add in place keeps the Member: TestReAddIgnoresTimeoutFromBeforeTheFailure.)
func TestRemoveRefusedWhileWriteIsOut(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 10 * time.Second
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	h.syncFiles()
	hung := outWrite(t, h, r)
	if err := pumped(h, func() error { return a.Fail(0) }); err != nil {
		t.Fatal(err)
	}
	if err := pumped(h, func() error { return a.Remove(0) }); err == nil {
		t.Fatal("remove of a member with a write still out on it (not given up yet) succeeded")
	}
	// Given up at the timeout: still out, still refused.
	r.now = r.now.Add(11 * time.Second)
	h.OnTick()
	if _, ok := r.done[0]; !ok {
		t.Fatal("the hung write was not given up")
	}
	if err := pumped(h, func() error { return a.Remove(0) }); err == nil {
		t.Fatal("remove of a member with a given-up write still out on it succeeded")
	}
	// It returns: the device may go, and come back.
	h.OnCompletion(hung.ud, 4096)
	if err := pumped(h, func() error { return a.Remove(0) }); err != nil {
		t.Fatalf("remove once the write returned: %v", err)
	}
	if err := pumped(h, func() error { return a.ReAdd(paths[0]) }); err != nil {
		t.Fatalf("re-add once the write returned: %v", err)
	}
}

// zcRing is a fakeRing on a zero-copy queue: a member read is never given
// up (Abandon refuses it), it is waited for while its member is failed.
type zcRing struct{ fakeRing }

func (r *zcRing) ZeroCopy() bool { return true }

// Found by review. A read that hangs past the member timeout on a
// zero-copy queue is not given up: its member is failed (so later reads
// leave it alone) but the read is still out on the device. It was not
// counted as pending I/O (only given-up operations were), so the device
// could be removed, closed and reused while the read was out. Remove is
// refused until it returns.
func TestRemoveRefusedWhileHungReadIsOut(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 10 * time.Second
	r := &zcRing{fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}}
	h := a.newQueue(r)
	h.syncFiles()
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: 0, Sectors: 8, Buf: make([]byte, 4096)})
	if len(r.pending) != 1 {
		t.Fatalf("read planned as %+v", r.pending)
	}
	hung := r.pending[0]
	role := int(hung.io.Member)
	r.pending = nil
	r.now = r.now.Add(11 * time.Second)
	h.OnTick()
	if s := a.Engine.State().Members[role].State; s != engine.MemberFaulty {
		t.Fatalf("member %d of the hung read is %v, want faulty", role, s)
	}
	if err := pumped(h, func() error { return a.Remove(role) }); err == nil {
		t.Fatalf("Remove(%d) succeeded with a member read still out on the device", role)
	}
	h.OnCompletion(hung.ud, 4096) // it lands
	for _, o := range r.pending { // (a retry on the other copy)
		h.OnCompletion(o.ud, int32(o.io.Sectors)<<9)
	}
	if _, ok := r.done[0]; !ok {
		t.Fatal("the read never completed")
	}
	if err := pumped(h, func() error { return a.Remove(role) }); err != nil {
		t.Fatalf("remove once the read returned: %v", err)
	}
}
