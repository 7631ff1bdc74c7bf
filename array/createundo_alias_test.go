package array

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (cu): a create given one disk under two names (a
// multipath LUN seen as two nodes) is refused by distinctDevices, which
// puts back what its probes replaced. The create's undo log
// (createundo.go) saved, for the second node, the bytes the first node's
// writes had already put there (the bitmap, the first probe), and
// undoWrites restores the members one after the other, the first node's
// original bytes first, the second node's "originals" (the first node's
// writes) last: the refused create leaves the disk holding the new array's
// bitmap and a probe block.
func TestRefusedCreateOverAliasLeavesDisk(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec CreateSpec
	}{
		{"raid1 no bitmap", CreateSpec{Undoable: true, Level: engine.Level1, NoBitmap: true}},
		{"raid1 bitmap", CreateSpec{Undoable: true, Level: engine.Level1, RegionSectors: testRegion}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rack := memdev.NewRack(rand.New(rand.NewPCG(3, 3)))
			const size = 8 << 20
			rack.AddDisk("/m0", size)
			d := rack.AddDisk("/m1", size)
			// What the disk held before: data everywhere.
			orig := make([]byte, size)
			r := rand.New(rand.NewPCG(9, 9))
			for i := range orig {
				orig[i] = byte(r.Uint32())
			}
			rack.Preload(d, 0, orig)
			var held *memdev.Dev
			spec := tc.spec
			spec.Force = true // the random bytes carry no signature, but a forced create is the worst case
			spec.OpenDevice = func(p string) (Device, error) {
				if p == "/dev/alias-of-m1" {
					props := *held.Props()
					props.Path = p
					return aliasDev{Dev: held, props: props}, nil
				}
				dv, err := rack.Open(p)
				if p == "/m1" && err == nil {
					held = dv
				}
				return dv, err
			}
			_, err := Open([]string{"/m0", "/m1", "/dev/alias-of-m1"}, spec, true)
			if err == nil {
				t.Fatal("create over one disk under two names: accepted")
			}
			t.Logf("refused: %v", err)
			got := rack.Current(d, 0, size)
			if !bytes.Equal(got, orig) {
				first, n := -1, 0
				for i := range got {
					if got[i] != orig[i] {
						if first < 0 {
							first = i
						}
						n++
					}
				}
				t.Errorf("refused create left /m1 changed: %d bytes differ, the first at byte %d", n, first)
			}
		})
	}
}
