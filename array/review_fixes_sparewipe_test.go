package array

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// TestReviewFixesAddSparesFailedWipeLeavesSuperblock: Found by review: since 4418c80,
// addSpares of two devices first writes every device's new superblock
// (distinctSpares), then goes through them again erasing signatures and
// writing superblocks. When the second device's erase fails (a write
// error), the call fails and that device is not added, but it keeps the
// superblock distinctSpares wrote there (a spare of this array), over
// what it held: a device the command did not take is changed. Before,
// nothing was written to a device before its own erase.
func TestReviewFixesAddSparesFailedWipeLeavesSuperblock(t *testing.T) {
	rack := memdev.NewRack(rand.New(rand.NewPCG(21, 21)))
	for _, p := range []string{"/m0", "/m1", "/s0", "/s1"} {
		rack.AddDisk(p, 8<<20)
	}
	open := func(p string) (Device, error) { return rack.Open(p) }
	a, err := Open([]string{"/m0", "/m1"}, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true, OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s1 := rack.Disk("/s1")
	// /s1 holds an ext4 file system (magic at byte 1080), and data in
	// the block where a superblock of ours goes.
	ext4 := make([]byte, 4096)
	ext4[1080], ext4[1081] = 0x53, 0xEF
	rack.Preload(s1, 0, ext4)
	old := bytes.Repeat([]byte{0xA5}, 4096)
	rack.Preload(s1, engine.SuperblockOffset, old)
	// Its first 4 KiB cannot be written (the erase of the ext4 magic).
	rack.SetFaults(s1, memdev.Fault{Ops: memdev.OpWrite, Off: 0, Len: 4096, Err: errors.New("injected write error")})
	err = a.AddSpares([]string{"/s0", "/s1"}, true)
	if err == nil {
		t.Fatal("add-spare with /s1 failing its erase: accepted")
	}
	t.Logf("add-spare: %v", err)
	for _, sp := range a.Spares() {
		if sp == "/s1" {
			t.Fatalf("/s1 is a spare after its erase failed")
		}
	}
	if got := rack.Current(s1, engine.SuperblockOffset, 4096); !bytes.Equal(got, old) {
		t.Fatalf("/s1, not added (its erase failed), has its block at byte %d overwritten (now %x...; was %x...): a superblock of this array was left on a device the command did not take",
			engine.SuperblockOffset, got[:8], old[:8])
	}
}
