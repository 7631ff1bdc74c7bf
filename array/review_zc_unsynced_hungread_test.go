package array

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review. In a range awaiting resync the copies may differ, and
// every read answers from the chosen copy (the lowest-numbered in sync,
// which the resync copies from, as md reads the first disk above its
// resync point), so that answers stay stable until the resync has made
// the copies equal (engine.Executor.retryRead, ErrChosenCopyBusy).
//
// On a zero-copy queue a read that hangs on the chosen copy is not given
// up at the member timeout, but its member is failed there
// (Executor.Tick: "so that later reads leave it alone"). When the hung
// read then lands, its answer (the failed copy's data) is taken, and
// the next read of the same range, with no write in between, answers
// from the other copy: the range reads one content, then another. (On
// the copy path the read given up is retried on the new chosen copy
// before it answers, and md, with no timeout of its own, keeps the
// copy in sync when its read lands: both answer one content.)
func TestReviewZCUnsyncedHungReadAnswerChanges(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	// No bitmap, not --assume-clean: a full resync is pending (not
	// started here), so the copies may differ everywhere.
	a, err := Open(paths, CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 10 * time.Second
	// The copies differ over the first 4 KiB (say a write in flight at a
	// crash reached one copy only).
	content := [][]byte{bytes.Repeat([]byte{'X'}, 4096), bytes.Repeat([]byte{'Y'}, 4096)}
	for i, p := range paths {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(content[i], int64(a.dataOffset)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	r := &zcRing{fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}}
	h := a.newQueue(r)
	h.syncFiles()
	read := func(tag uint16) []byte {
		buf := make([]byte, 4096)
		h.Handle(&ublk.Request{Tag: tag, Op: ublk.IOOpRead, Sector: 0, Sectors: 8, Buf: buf})
		return buf
	}
	// Serve op o from its member's copy (the device answers).
	land := func(o fakeOp) {
		copy(o.data, content[o.io.Member])
		h.OnCompletion(o.ud, int32(len(o.data)))
	}

	first := read(0)
	if len(r.pending) != 1 || r.pending[0].io.Member != 0 {
		t.Fatalf("the read of the unsynced range was planned as %+v, want the chosen copy (role 0)", r.pending)
	}
	hung := r.pending[0]
	r.pending = nil
	r.now = r.now.Add(11 * time.Second)
	h.OnTick() // zero copy: not given up, role 0 failed (role 1 holds a copy)
	land(hung) // the chosen copy answers after all
	for len(r.pending) > 0 {
		o := r.pending[0]
		r.pending = r.pending[1:]
		land(o)
	}
	if err, ok := r.done[0]; !ok || err != nil {
		t.Fatalf("first read: done %v, err %v", ok, err)
	}

	second := read(1)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		// (A read held until role 0's failure is durable goes on at a
		// wake-up once it is.)
		if _, ok := r.done[1]; ok || len(r.pending) > 0 {
			break
		}
		h.OnWake()
	}
	for len(r.pending) > 0 {
		o := r.pending[0]
		r.pending = r.pending[1:]
		land(o)
	}
	if err, ok := r.done[1]; !ok || err != nil {
		t.Fatalf("second read: done %v, err %v", ok, err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("two reads of a range awaiting resync, no write between, answered %q... then %q...: the answer of the hung read on the chosen copy was taken after its member was failed at the timeout", first[:4], second[:4])
	}
}
