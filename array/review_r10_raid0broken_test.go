package array

import (
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review (r10): one failed write on a raid0 member (a transient
// error: the device answers again, every member is present) records that
// member as failed in the other members' superblocks, and the array then
// does not assemble without --force ("1 of 2 members active", no hint of
// --force). md's raid0 records nothing: md_error() returns right after
// raid0_error() for level 0 (which only sets MD_BROKEN, the rdev is never
// marked Faulty, no superblock update), so `mdadm --assemble` starts the
// array again as it was. The project's own Fail refuses a raid0 member for
// exactly this reason ("recorded, the failure would leave an array that
// does not assemble", manage.go); the I/O error path records it anyway.
func TestReviewR10Raid0TransientWriteErrorNeedsForce(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level0, ChunkSectors: 16}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	r := &pRing{done: map[uint16]error{}, failOn: func(io engine.MemberIO) bool {
		return io.Member == 1 && io.Kind == engine.IOWrite
	}}
	h := a.newQueue(r)
	// Array sectors 16..31: chunk 1, on member 1, whose write fails once.
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 16, Sectors: 16, Buf: pageBuf(16 << 9)})
	pServe(t, rng, h, r, []uint16{0})
	if r.done[0] == nil {
		t.Fatal("the write to the failing member succeeded")
	}
	h.Close()
	_ = a.SetClean(true) // a clean stop, as del does
	a.Close()
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatalf("raid0 after one transient write error on member 1 (device back, both members given) does not assemble without --force: %v; md's raid0 records no member failure (md_error returns after raid0_error's MD_BROKEN for level 0) and assembles it", err)
	}
	b.Close()
}
