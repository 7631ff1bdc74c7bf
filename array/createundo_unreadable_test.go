package array

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (cu): a disk with a sector that cannot be read (a
// pending sector: reads fail, a write remaps it) where the new array's
// metadata goes (its bitmap, its shadow superblock) is what a create
// writes over: md's create never reads those ranges and succeeds, the
// write curing the sector. The create's undo log reads every range before
// the create writes it (undoLog.save), and a read that fails fails the
// write: under the shadow superblock the whole create is refused; under
// the bitmap (first written by the dirty mark) the member is failed as the
// array starts, a new array degraded at birth. An unreadable range is now
// noted, not read.
func TestCreateOverUnreadableMetadataSector(t *testing.T) {
	spec := CreateSpec{Undoable: true, Level: engine.Level1, RegionSectors: testRegion}
	// Where the bitmap goes on these disks.
	probeRack := memdev.NewRack(rand.New(rand.NewPCG(1, 1)))
	probeRack.AddDisk("/m0", 16<<20)
	probeRack.AddDisk("/m1", 16<<20)
	s := spec
	s.OpenDevice = func(p string) (Device, error) { return probeRack.Open(p) }
	a, err := Open([]string{"/m0", "/m1"}, s, true)
	if err != nil {
		t.Fatal(err)
	}
	sb := *a.SBs[1]
	a.KeepCreated()
	a.Close()
	shadow, ok := sb.ShadowOffset()
	if sb.BitmapBytes == 0 || !ok {
		t.Fatal("setup: no bitmap or no shadow slot")
	}
	for _, tc := range []struct {
		name string
		off  int64
	}{
		{"bitmap", int64(sb.BitmapOffset)},
		{"shadow superblock", int64(shadow)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rack := memdev.NewRack(rand.New(rand.NewPCG(2, 2)))
			rack.AddDisk("/m0", 16<<20)
			d := rack.AddDisk("/m1", 16<<20)
			rack.SetFaults(d, memdev.Fault{Ops: memdev.OpRead, Off: tc.off, Len: 512, Err: errors.New("unrecovered read error")})
			s := spec
			s.OpenDevice = func(p string) (Device, error) { return rack.Open(p) }
			a, err := Open([]string{"/m0", "/m1"}, s, true)
			if err != nil {
				t.Fatalf("create over a disk with an unreadable sector at byte %d (the %s, which the create only writes): %v", tc.off, tc.name, err)
			}
			if err := a.SetClean(false); err != nil {
				t.Errorf("dirty mark: %v", err)
			}
			if a.Degraded() {
				t.Errorf("the new array is degraded at its creation: %+v", a.Status().Members)
			}
			a.KeepCreated()
			a.Close()
		})
	}
}
