package array

import (
	"errors"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// refusingRing is a fakeRing whose SubmitMember fails (the ring cannot
// take an SQE); Fail records the queue's failure instead of panicking.
type refusingRing struct {
	fakeRing
	failed error
}

func (r *refusingRing) SubmitMember(uint64, uint16, *Member, bool, engine.MemberIO, uint64, []byte) error {
	return errors.New("io_uring_enter: bad address")
}

func (r *refusingRing) Fail(err error) {
	if r.failed == nil {
		r.failed = err
	}
}

// A member operation the queue's ring could not take is a failure of the
// queue, not of the member: it used to come back to the executor as EIO,
// which failed a healthy member (and the next write the other one, up to
// the last copy). The queue fails instead (the device is then recovered
// and the request reissued): no member is failed and the request is not
// completed.
func TestSubmitRefusedFailsQueueNotMember(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := &refusingRing{fakeRing: fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}}
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 0, Sectors: 8, Buf: make([]byte, 4096)})
	if r.failed == nil {
		t.Fatal("the ring refused the member operations, yet the queue was not failed")
	}
	for i, m := range a.Engine.State().Members {
		if m.State != engine.MemberActive {
			t.Errorf("member %d is %v after its ring refused an operation: want active", i, m.State)
		}
	}
	if err, ok := r.done[0]; ok {
		t.Errorf("the request was completed (%v): want it left for the next server", err)
	}
}

// Found by review. The operations the ring refused were never issued: the failed queue,
// which keeps serving ticks while it drains its member I/O in flight (up
// to ublk's detachDrain, longer than the shortest member timeout), must
// not give them up at the member timeout as if the member hung. That
// fails the healthy member after all (and records the failure), and
// counts late I/O that never returns on its device, which then refuses
// every rebuild or re-add for the life of the process.
func TestSubmitRefusedNotGivenUpAtTimeout(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 2 * time.Second
	r := &refusingRing{fakeRing: fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}}
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 0, Sectors: 8, Buf: make([]byte, 4096)})
	if r.failed == nil {
		t.Fatal("the ring refused the member operations, yet the queue was not failed")
	}
	r.now = r.now.Add(3 * time.Second)
	h.OnTick()
	for i, m := range a.Engine.State().Members {
		if m.State != engine.MemberActive {
			t.Errorf("member %d is %v after a tick past the timeout of an operation its ring refused: want active", i, m.State)
		}
		if lateOn(a.Members[i]) {
			t.Errorf("member %d has late I/O out, though nothing was ever issued to it", i)
		}
	}
	if err, ok := r.done[0]; ok {
		t.Errorf("the request was completed (%v): want it left for the next server", err)
	}
}
