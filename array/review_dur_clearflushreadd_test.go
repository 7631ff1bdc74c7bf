package array

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (dur). A bitmap batch that writes a region clean flushes
// every member first ("Bits clear only over durable data"). Here /m1's
// flush fails: /m1 is failed (recorded), while the batch still commits on
// /m0 with the region clean. /m1's cached copy of the region's last write
// is then lost (a power cut; that is what a failed flush allows). /m1's
// superblock is at the generation the events-cleared header already
// carried, so a re-add copies only the regions dirty now: the region /m1
// never made durable is clean and skipped, /m1 is made active holding the
// old data, and reads of the region answer either version.
func TestReviewdurClearFlushFailReAdd(t *testing.T) {
	rack := memdev.NewRack(rand.New(dropAll{}))
	paths := []string{"/m0", "/m1"}
	for _, p := range paths {
		rack.AddDisk(p, 32<<20)
	}
	spec := CreateSpec{OpenDevice: func(p string) (Device, error) { return rack.Open(p) }}
	create := spec
	create.Level, create.AssumeClean, create.RegionSectors = engine.Level1, true, testRegion
	a, err := Open(paths, create, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	write := func(off int64, p byte) {
		first, last := a.Bitmap.Regions(uint64(off)>>9, 8)
		if !a.Bitmap.StartWrite(first, last, 0) {
			a.fl.do(func() {})
			a.fl.do(func() {})
		}
		for r, m := range a.Members {
			if writable(a.Engine.State().Members[r]) {
				if err := m.WriteAt(bytes.Repeat([]byte{p}, 4096), int64(a.dataOffset)+off); err != nil {
					t.Fatal(err)
				}
			}
		}
		a.Bitmap.EndWrite(first, last)
	}
	// A first clear in this generation: the header's events cleared is
	// this generation's.
	write(2<<20, 0x11)
	a.fl.do(a.fl.clearIdle)
	const X = 5 << 20
	write(X, 0x5b) // acknowledged, in both members' caches
	rx, _ := a.Bitmap.Regions(X>>9, 8)
	if !a.Bitmap.Dirty(rx) {
		t.Fatal("setup: written region not dirty")
	}

	// /m1's flush fails during the clear's batch.
	rack.SetFaults(rack.Disk(paths[1]), memdev.Fault{Ops: memdev.OpFlush, Err: unix.EIO})
	a.fl.do(a.fl.clearIdle)
	deadline := time.Now().Add(10 * time.Second)
	for {
		sb, err := engine.ParseSuperblock(rack.Stable(rack.Disk(paths[0]), engine.SuperblockOffset, engine.SuperblockSize))
		if err == nil && sb.Roles[1].State == engine.RoleFaulty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("setup: /m1's failed flush never recorded; state %v", a.Engine.State().Members[1].State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("region %d on the bitmap after the failed clear: %s", rx, a.Bitmap.State(rx))

	// Power cut: /m1's cache (the write it never made durable) is lost.
	rack.PowerCut()
	a.Close()
	rack.SetFaults(rack.Disk(paths[1])) // the device works again
	if got := rack.Stable(rack.Disk(paths[0]), int64(a.dataOffset)+X, 1)[0]; got != 0x5b {
		t.Fatalf("setup: /m0 lost the flushed write: %#x", got)
	}

	b, err := Open(paths, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SetClean(false); err != nil {
		t.Fatal(err)
	}
	b.StartBackground()
	b.WaitSync()
	if st := b.Engine.State().Members[1].State; st == engine.MemberActive {
		t.Fatalf("setup: /m1 assembled in sync after its recorded failure")
	}
	t.Logf("after assembly: region %d %s, events cleared %d, /m1 events %d", rx, b.Bitmap.State(rx), b.Bitmap.EventsCleared(),
		func() uint64 {
			sb, _ := engine.ParseSuperblock(rack.Stable(rack.Disk(paths[1]), engine.SuperblockOffset, engine.SuperblockSize))
			return sb.Events
		}())
	if err := b.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	b.WaitSync()
	if st := b.Engine.State().Members[1].State; st != engine.MemberActive {
		t.Fatalf("setup: /m1 after the re-add: %v", st)
	}
	d0 := rack.Current(rack.Disk(paths[0]), int64(b.dataOffset)+X, 4096)
	d1 := rack.Current(rack.Disk(paths[1]), int64(b.dataOffset)+X, 4096)
	if !bytes.Equal(d0, d1) {
		t.Fatalf("after the re-add /m1 is active but holds %#x at array byte %d where /m0 holds %#x: region %d (%s) was cleared by a batch whose flush /m1 failed, and the re-add skipped it",
			d1[0], X, d0[0], rx, b.Bitmap.State(rx))
	}
}
