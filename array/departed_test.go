package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
	"golang.org/x/sys/unix"
)

// replaceUnderQueue runs ReplaceMember(role, path) while the test, as the
// queue thread, keeps the queue's fixed files in step (swapFile waits for
// that).
func replaceUnderQueue(t *testing.T, a *Array, h *queue, role int, path string) {
	t.Helper()
	underQueue(t, h, func() error { return a.ReplaceMember(role, path, false) })
}

// underQueue runs fn (a member change) likewise.
func underQueue(t *testing.T, h *queue, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		case <-time.After(time.Millisecond):
			h.syncFiles()
		}
	}
}

// Replacing a member whose I/O hangs (what replace is most often for):
// the hung operations, given up after the member timeout or failing
// late, are the old device's. Before, the queue charged them to the role's
// current device: the timeout failed the new member being rebuilt and
// counted a late write on it, which fenced it off (every write to it
// refused), so the replacement never came into sync.
func TestReplaceHungMemberKeepsNewOne(t *testing.T) {
	for _, how := range []string{"timeout", "late error"} {
		t.Run(how, func(t *testing.T) {
			paths := memberFiles(t, 3, 16<<20)
			a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			a.MemberTimeout = 10 * time.Second
			h, r, hung := hungWrite(t, a)
			replaceUnderQueue(t, a, h, 0, paths[2])
			nm := a.currentMember(0)
			if nm == nil || nm.Path != paths[2] {
				t.Fatalf("role 0 holds %v after the replace", nm)
			}
			switch how {
			case "timeout":
				r.now = r.now.Add(11 * time.Second)
				h.OnTick()
			default:
				h.OnCompletion(hung.ud, -int32(unix.EIO))
			}
			if err, ok := r.done[0]; !ok || err != nil {
				t.Fatalf("the write (done on member 1): done %v, err %v", ok, err)
			}
			if s := a.Engine.State().Members[0].State; s == engine.MemberFaulty {
				t.Fatal("the old device's hung write failed the new member of its role")
			}
			if nm.lateWrites.Load() != 0 || lateOn(nm) {
				t.Fatal("the old device's late write was counted on the new member")
			}
			if how == "timeout" {
				if !lateOn(&Member{key: hung.m.key, keyOK: true}) {
					t.Fatal("the write given up is not counted on the old device it is still out on")
				}
				h.OnCompletion(hung.ud, 4096)
			}
			// The rebuild gets through once nothing holds the barrier.
			waitActive(t, a, 0)
		})
	}
}

// A member failed while an operation hangs on it, then re-added: the
// operation's late error is its device's from before the failure, not the
// re-added role's. Before, the queue compared devices only (a re-add
// reuses the open device), so the late error failed the role again, in
// the middle of its rebuild.
func TestReAddIgnoresOperationsFromBeforeTheFailure(t *testing.T) {
	a, h, r, hung := reAddOverHungWrite(t)
	if s := a.Engine.State().Members[0].State; s == engine.MemberFaulty {
		t.Fatalf("role 0 is %v after the re-add", s)
	}
	h.OnCompletion(hung.ud, -int32(unix.EIO))
	if err, ok := r.done[0]; !ok || err != nil {
		t.Fatalf("the write (done on member 1): done %v, err %v", ok, err)
	}
	if s := a.Engine.State().Members[0].State; s == engine.MemberFaulty {
		t.Fatal("an error of an operation sent before the failure failed the re-added member")
	}
	waitActive(t, a, 0)
	// An operation sent after the re-add is the role's: its error fails it.
	h.Handle(&ublk.Request{Tag: 1, Op: ublk.IOOpWrite, Sector: 2048, Sectors: 8, Buf: make([]byte, 4096)})
	failRole0(h, r.pending)
	if s := a.Engine.State().Members[0].State; s != engine.MemberFaulty {
		t.Fatalf("a write error after the re-add left role 0 %v", s)
	}
}

// A grow restarts the bitmap flusher (Array.start) under live I/O: the
// roles keep their devices, so an operation in flight stays the role's and
// its error still fails the member.
func TestFlusherRestartKeepsOperationsTheRoles(t *testing.T) {
	_, a := openRaid1(t)
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 1024, Sectors: 8, Buf: make([]byte, 4096)})
	if len(r.pending) != 2 {
		t.Fatalf("write planned as %+v", r.pending)
	}
	ps := r.pending
	r.pending = nil
	a.start()
	failRole0(h, ps)
	if err, ok := r.done[0]; !ok || err != nil {
		t.Fatalf("the write: done %v, err %v", ok, err)
	}
	if s := a.Engine.State().Members[0].State; s != engine.MemberFaulty {
		t.Fatalf("a write error after the flusher restarted was charged to nobody (role 0 %v)", s)
	}
}

// As TestReAddIgnoresOperationsFromBeforeTheFailure, but the hung write
// is given up by the member timeout after the re-add (and returns later)
// instead of failing late.
func TestReAddIgnoresTimeoutFromBeforeTheFailure(t *testing.T) {
	a, h, r, hung := reAddOverHungWrite(t)
	// The member timeout is seconds: the rebuild is under way (past
	// waitLate, at the hung write's barrier) long before it.
	time.Sleep(300 * time.Millisecond)
	r.now = r.now.Add(11 * time.Second)
	h.OnTick() // the write from before the failure is given up
	if err, ok := r.done[0]; !ok || err != nil {
		t.Fatalf("the write (done on member 1): done %v, err %v", ok, err)
	}
	time.Sleep(500 * time.Millisecond) // the rebuild goes on meanwhile
	if s := a.Engine.State().Members[0].State; s == engine.MemberFaulty {
		t.Fatal("a write given up from before the failure failed the re-added member")
	}
	h.OnCompletion(hung.ud, 4096) // it returns at last
	waitActive(t, a, 0)
}

// hungWrite serves a raid1 write on a new queue of a, completes it on
// every member but role 0's, and returns the queue, its ring and the
// operation left hanging on role 0.
func hungWrite(t *testing.T, a *Array) (*queue, *fakeRing, fakeOp) {
	t.Helper()
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 1024, Sectors: 8, Buf: make([]byte, 4096)})
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
	return h, r, hung
}

// waitActive waits until role is active (in sync), for 10 s at most.
func waitActive(t *testing.T, a *Array, role int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for a.Engine.State().Members[role].State != engine.MemberActive {
		if time.Now().After(deadline) {
			t.Fatalf("role %d did not come into sync: %v", role, a.Engine.State().Members[role])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openRaid1 makes a two-member raid1 over 16 MiB files, in sync, without
// a bitmap, closed when the test ends.
func openRaid1(t *testing.T) ([]string, *Array) {
	t.Helper()
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return paths, a
}

// failRole0 completes 4 KiB operations ops on h: role 0's with EIO, the
// others whole.
func failRole0(h *queue, ops []fakeOp) {
	for _, o := range ops {
		if o.io.Member == 0 {
			h.OnCompletion(o.ud, -int32(unix.EIO))
		} else {
			h.OnCompletion(o.ud, 4096)
		}
	}
}

// reAddOverHungWrite makes a raid1 (member timeout 10 s) whose role 0
// holds a hung write (hungWrite), fails role 0 and re-adds its device.
func reAddOverHungWrite(t *testing.T) (*Array, *queue, *fakeRing, fakeOp) {
	t.Helper()
	paths, a := openRaid1(t)
	a.MemberTimeout = 10 * time.Second
	h, r, hung := hungWrite(t, a)
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	underQueue(t, h, func() error { return a.ReAdd(paths[0]) })
	return a, h, r, hung
}
