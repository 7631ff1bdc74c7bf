package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// As TestReAddIgnoresOperationsFromBeforeTheFailure, but the hung write
// is given up by the member timeout after the re-add (and returns later)
// instead of failing late.
func TestReAddIgnoresTimeoutFromBeforeTheFailure(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 10 * time.Second
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 1024, Sectors: 8, Buf: make([]byte, 4096)})
	var hung fakeOp
	for _, o := range r.pending {
		if o.io.Member == 0 {
			hung = o
		} else {
			h.OnCompletion(o.ud, 4096)
		}
	}
	r.pending = nil
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	underQueue(t, h, func() error { return a.ReAdd(paths[0]) })
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
	deadline := time.Now().Add(10 * time.Second)
	for a.Engine.State().Members[0].State != engine.MemberActive {
		if time.Now().After(deadline) {
			t.Fatalf("the re-added member did not come into sync: %v", a.Engine.State().Members[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
