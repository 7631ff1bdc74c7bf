package array

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review (rd). In a range awaiting resync every read answers
// from the chosen copy (the lowest-numbered readable one), and a block
// the chosen copy fails is answered by the next copy, which read repair
// then copies over the chosen one, "with the data the read returned"
// (TestReadRepairCopiesTheCopyTheReadReturned), so that the next read of
// the block, from the chosen copy, answers the same. The repair does not
// know which copy answered: it takes the lowest-numbered copy that is not
// bad and reads now. When that copy (the one that answered) fails the
// repair's read (a second bad sector, a transient error), the repair
// copies a third copy, which differs there, over the chosen copy: the
// block read twice, with no write between, answers 0x11 and then 0x22.
// (md answers a read only after fix_read_error, from the copy it fixed.)
func TestReviewrdRepairSourceNotTheCopyRead(t *testing.T) {
	set := hookRW(t)
	paths := memberFiles(t, 3, 16<<20)
	// No bitmap, not --assume-clean: a full resync is pending (not
	// started here), so the copies may differ everywhere.
	a, err := Open(paths, CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const n = 8
	fill := []byte{0xee, 0x11, 0x22} // member 0: the chosen copy, its block unreadable
	for m, p := range paths {
		scribble(t, a, p, 0, n<<9, fill[m])
	}
	a.mu.Lock()
	dev0, dev1 := a.Members[0].Device, a.Members[1].Device
	a.mu.Unlock()
	var once sync.Once
	var wmu sync.Mutex
	var wrote []byte // the first byte of each write of the block to member 0
	set(func(d Device, p []byte, off int64, write bool) error {
		if d == dev0 && write && p != nil && off == int64(a.dataOffset) {
			wmu.Lock()
			wrote = append(wrote, p[0])
			wmu.Unlock()
		}
		failed := false
		if d == dev1 && !write && p != nil && off == int64(a.dataOffset) {
			once.Do(func() { failed = true }) // the repair's read of the copy that answered
		}
		if failed {
			return unix.EIO
		}
		return deviceRW(d, p, off, write)
	})

	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	h.syncFiles()
	// serve completes the pending member reads: member 0's fails (its bad
	// block) while fail0 is set, the others read the member's data.
	serve := func(fail0 bool) {
		for len(r.pending) > 0 {
			o := r.pending[0]
			r.pending = r.pending[1:]
			if o.io.Member == 0 && fail0 {
				h.OnCompletion(o.ud, -int32(unix.EIO))
				continue
			}
			d := dataOf(t, a, paths[o.io.Member])
			copy(o.data, d[o.io.Sector<<9:])
			h.OnCompletion(o.ud, int32(len(o.data)))
		}
	}
	read := func(tag uint16, fail0 bool) []byte {
		buf := make([]byte, n<<9)
		h.Handle(&ublk.Request{Tag: tag, Op: ublk.IOOpRead, Sector: 0, Sectors: n, Buf: buf})
		serve(fail0)
		if err, ok := r.done[tag]; !ok || err != nil {
			t.Fatalf("read %d: done %v, err %v", tag, ok, err)
		}
		return buf
	}

	first := read(0, true) // member 0 fails, member 1 answers
	if first[0] != 0x11 {
		t.Fatalf("the first read answered %#x, want member 1's 0x11", first[0])
	}
	// The repair's read of member 1 fails: nothing is rewritten. Member
	// 0's block still fails the next read, which member 1 answers again
	// and reports again; that repair (after the first: one worker) reads
	// member 1 and rewrites member 0 with what the reads answered.
	again := read(1, true)
	waitFor(t, "the read repair ran", func() bool { return a.ReadRepairs() >= 1 })
	wmu.Lock()
	for _, b := range wrote {
		if b != 0x11 {
			t.Errorf("the read repair wrote %#x over the chosen copy, which the reads answered 0x11 from member 1", b)
		}
	}
	wmu.Unlock()
	third := read(2, false) // from the chosen copy, repaired
	if !bytes.Equal(first, again) || !bytes.Equal(first, third) {
		t.Fatalf("a block of a range awaiting resync, read three times with no write between, answered %#x, %#x, then %#x: the repair copied another copy than the one that answered over the chosen copy", first[0], again[0], third[0])
	}
}
