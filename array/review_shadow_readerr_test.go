package array

import (
	randv2 "math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. A member whose primary superblock is torn (its
// current state is in the shadow copy) and whose shadow cannot be read
// (EIO) is reported by engine.ReadSuperblock with the torn primary's
// checksum error: the I/O error is dropped. Re-add (previousRole), which
// reports a superblock that cannot be read as such, then calls the
// device "not a member of this array: use replace", sending the operator
// to a full rebuild onto it (and the daemon's restore takes it for
// "blank, or not ours" rather than "cannot be read").
func TestReviewShadowReadErrorHidden(t *testing.T) {
	rack := memdev.NewRack(randv2.New(randv2.NewPCG(1, 2)))
	paths := []string{"/m0", "/m1"}
	for _, p := range paths {
		rack.AddDisk(p, 16<<20)
	}
	open := func(p string) (Device, error) { return rack.Open(p) }
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 128, AssumeClean: true, OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	d := rack.Disk("/m1")
	blk := rack.Current(d, engine.SuperblockOffset, engine.SuperblockSize)
	sb, err := engine.ParseSuperblock(blk)
	if err != nil {
		t.Fatal(err)
	}
	slot, ok := sb.ShadowOffset()
	if !ok {
		t.Fatal("no shadow slot")
	}
	// A tear: a sector past the first differs (its checksum fails).
	blk[engine.SuperblockSize-1] ^= 0xff
	rack.Preload(d, engine.SuperblockOffset, blk)
	// The shadow, which holds the member's state, cannot be read.
	rack.SetFaults(d, memdev.Fault{Ops: memdev.OpRead, Off: int64(slot), Len: engine.SuperblockSize, Err: unix.EIO})

	err = a.ReAdd("/m1")
	t.Logf("re-add: %v", err)
	if err == nil {
		t.Fatal("re-add succeeded with an unreadable superblock")
	}
	if strings.Contains(err.Error(), "not a member") || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("re-add of a member whose superblock copy cannot be read (EIO): %q; want the read error, not a verdict that it is no member", err)
	}
}
