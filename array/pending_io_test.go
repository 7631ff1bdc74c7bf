package array

import (
	"slices"
	"testing"
	"time"
	"unsafe"

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

// shortRemoveDrain makes Remove wait only briefly for operations out
// before refusing (the test's operations return only when it says so).
func shortRemoveDrain(t *testing.T) {
	saved := removeDrain
	removeDrain = 20 * time.Millisecond
	t.Cleanup(func() { removeDrain = saved })
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
	shortRemoveDrain(t)
	paths, a := openRaid1(t)
	a.MemberTimeout = 10 * time.Second
	h, r, hung := hungWrite(t, a) // out on member 0, not given up
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
	shortRemoveDrain(t)
	_, a := openRaid1(t)
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

// Found by reviewing the fix. A re-add in place (the failed member still
// open) made a new roleDevice with zero counts, while the write out from
// before the re-add counted on the old one: after a second failure the
// device could be removed with that write still out. The counts are the
// Member's, which a re-add in place keeps.
func TestRemoveAfterReAddInPlaceWithWriteOut(t *testing.T) {
	shortRemoveDrain(t)
	paths, a := openRaid1(t)
	a.MemberTimeout = 10 * time.Second
	h, _, hung := hungWrite(t, a) // out on member 0, not given up
	if err := pumped(h, func() error { return a.Fail(0) }); err != nil {
		t.Fatal(err)
	}
	if err := pumped(h, func() error { return a.ReAdd(paths[0]) }); err != nil {
		t.Fatalf("re-add in place: %v", err)
	}
	if err := pumped(h, func() error { return a.Fail(0) }); err != nil {
		t.Fatal(err)
	}
	if err := pumped(h, func() error { return a.Remove(0) }); err == nil {
		t.Fatal("re-add in place, then remove, with the write from before the re-add still out on the device: both succeeded")
	}
	h.OnCompletion(hung.ud, 4096)
	if err := pumped(h, func() error { return a.Remove(0) }); err != nil {
		t.Fatalf("remove once the write returned: %v", err)
	}
}

// Found by reviewing the fix. Replace closed the old device at once
// (closeWhenAnswered waited for given-up I/O only) while a write was
// still out on it, leaving it free for other users under that write. It
// stays open until the write returns.
func TestReplaceKeepsDeviceOpenWithWriteOut(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 10 * time.Second
	h, _, hung := hungWrite(t, a) // out on member 0, not given up
	if err := pumped(h, func() error { return a.Fail(0) }); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	old := a.Members[0]
	a.mu.Unlock()
	if err := pumped(h, func() error { return a.Replace(0, paths[2]) }); err != nil {
		t.Fatalf("replace: %v", err)
	}
	answering := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return slices.Contains(a.answering, old)
	}
	if !answering() {
		t.Fatalf("replace closed %s with a write still out on it", old.Path)
	}
	h.OnCompletion(hung.ud, 4096)
	deadline := time.Now().Add(10 * time.Second)
	for answering() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still open after its write returned", old.Path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var memberSink *Member

// Found by reviewing the fix. Each queue's count must be on a cache line
// of its own, off the Member fields every queue reads for every operation
// (the first shard shared the line of roleDevice.m).
func TestMemberOutShardsOwnLines(t *testing.T) {
	m := &Member{}
	memberSink = m // on the heap, as openMember's
	hot := uintptr(unsafe.Pointer(&m.keyOK)) / 64
	lines := map[uintptr]int{}
	for i := range m.out {
		l := uintptr(unsafe.Pointer(&m.out[i].n)) / 64
		if l <= hot {
			t.Errorf("out[%d].n is on a cache line with the fields before it", i)
		}
		if j, ok := lines[l]; ok {
			t.Errorf("out[%d].n and out[%d].n share a cache line", j, i)
		}
		lines[l] = i
	}
}

// A remove right after a fail (as a script does) waits a moment for the
// operations out on a healthy device: one returning meanwhile does not
// make it refused (mdadm retries a remove the kernel answers EBUSY).
func TestRemoveWaitsForOperationsThatReturn(t *testing.T) {
	_, a := openRaid1(t)
	h, _, hung := hungWrite(t, a)
	if err := pumped(h, func() error { return a.Fail(0) }); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- a.Remove(0) }()
	start := time.Now()
	for returned := false; ; {
		select {
		case err := <-res:
			if err != nil {
				t.Fatalf("remove with a write that returned while it waited: %v", err)
			}
			return
		case <-time.After(5 * time.Millisecond):
			if !returned && time.Since(start) > 50*time.Millisecond {
				h.OnCompletion(hung.ud, 4096) // (on the queue's thread: here)
				returned = true
			}
			h.OnWake()
		}
	}
}
