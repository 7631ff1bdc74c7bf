package array

import (
	"math/rand/v2"
	"testing"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Members grown in place past the largest member size the array can use
// (thin volumes, sparse virtual disks): a grow asking for more than that
// is refused with an error, as for any size above what the members
// allow; it must not crash (the daemon's grow handler runs this check).
func TestGrowCheckAboveMaxOnHugeMembers(t *testing.T) {
	rack := memdev.NewRack(rand.New(rand.NewPCG(3, 5)))
	paths := []string{"/g0", "/g1"}
	for _, p := range paths {
		rack.AddDisk(p, 4<<20)
	}
	spec := CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048,
		OpenDevice: func(p string) (Device, error) { return rack.Open(p) }}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, p := range paths {
		rack.Grow(rack.Disk(p), int64(engine.MaxMemberSectors)<<9+64<<20, nil)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("GrowCheck above the maximum member size panicked: %v", r)
		}
	}()
	if _, err := a.GrowCheck(engine.MaxMemberSectors+1<<20, false); err == nil {
		t.Fatal("a data area above the maximum member size was not refused")
	}
}
