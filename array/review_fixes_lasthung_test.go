package array

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// TestReviewFixesZCHungReadLastCopy: Found by review: the sibling of
// TestReviewZCUnsyncedHungReadAnswerChanges (75850f3) where the hung
// read's member is the last copy: Tick does not fail it (FailRedundant
// keeps it), yet its late answer is dropped as a failed copy's
// (lateHung: r.hung only says the read was waited for) and the read is
// retried avoiding the only copy: the request fails with EIO, though the
// member answered it with the data and stays active.
func TestReviewFixesZCHungReadLastCopy(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	// No bitmap, not --assume-clean: a full resync is pending.
	a, err := Open(paths, CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 10 * time.Second
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte{'X'}, 4096)
	f, err := os.OpenFile(paths[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(content, int64(a.dataOffset)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := &zcRing{fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}}
	h := a.newQueue(r)
	h.syncFiles()
	buf := make([]byte, 4096)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: 0, Sectors: 8, Buf: buf})
	for deadline := time.Now().Add(10 * time.Second); len(r.pending) == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		h.OnWake()
	}
	if len(r.pending) != 1 || r.pending[0].io.Member != 0 {
		t.Fatalf("the read was planned as %+v, want role 0 (the last copy)", r.pending)
	}
	hung := r.pending[0]
	r.pending = nil
	r.now = r.now.Add(11 * time.Second)
	h.OnTick() // zero copy: not given up; role 0 is the last copy: not failed
	if s := a.Status().Members[0].State; s != "active" {
		t.Fatalf("setup: role 0 %s after the timeout, want active (the last copy)", s)
	}
	copy(hung.data, content)
	h.OnCompletion(hung.ud, int32(len(hung.data))) // the last copy answers after all
	for len(r.pending) > 0 {
		o := r.pending[0]
		r.pending = r.pending[1:]
		copy(o.data, content)
		h.OnCompletion(o.ud, int32(len(o.data)))
	}
	err, ok := r.done[0]
	if !ok || err != nil || !bytes.Equal(buf, content) {
		t.Fatalf("a read of the last copy (role 0, active) that answered late with its data: done %v, err %v, data ok %v", ok, err, bytes.Equal(buf, content))
	}
}
