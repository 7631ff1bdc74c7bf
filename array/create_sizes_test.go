package array

import (
	"bytes"
	"math/rand"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Create records the array's member size (the smallest member's) on
// every member: an assembly without the smallest member (degraded) serves
// the array it was, same size and, for raid10's far layout (copies placed
// by the member size), same data. It used to record each member's own
// size: the degraded assembly then served a larger array, recorded that
// size on the members, and raid10 far read back wrong data.
func TestDegradedAssemblyKeepsSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec CreateSpec
	}{
		{"raid10 far", CreateSpec{Level: engine.Level10, Layout: engine.LayoutF2, ChunkSectors: 16, NoBitmap: true}},
		{"raid1", CreateSpec{Level: engine.Level1, NoBitmap: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(1))
			paths := memberFiles(t, 2, 16<<20)
			if err := os.Truncate(paths[1], 24<<20); err != nil {
				t.Fatal(err)
			}
			a, err := Open(paths, tc.spec, true)
			if err != nil {
				t.Fatal(err)
			}
			a.WaitSync()
			size := a.Engine.Geo.ArraySectors()
			ref := make([]byte, size<<9)
			rng.Read(ref)
			r := &pRing{done: map[uint16]error{}}
			h := a.newQueue(r)
			const step = 128 // sectors
			for s := uint64(0); s < size; s += step {
				buf := pageBuf(step << 9)
				copy(buf, ref[s<<9:])
				delete(r.done, 0)
				h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: s, Sectors: step, Buf: buf})
				pServe(t, rng, h, r, []uint16{0})
				if err := r.done[0]; err != nil {
					t.Fatal(err)
				}
			}
			for s := uint64(0); s < size; s += step {
				if !bytes.Equal(pReadOne(t, rng, a, s, step), ref[s<<9:(s+step)<<9]) {
					t.Fatalf("sector %d reads back wrong before the stop", s)
				}
			}
			if err := a.SetClean(true); err != nil {
				t.Fatal(err)
			}
			a.Close()

			b, err := Open(paths[1:], CreateSpec{Level: -1}, false)
			if err != nil {
				t.Logf("degraded assembly refused: %v", err)
				return
			}
			defer b.Close()
			got := b.Engine.Geo.ArraySectors()
			if got != size {
				t.Errorf("created with %d sectors; assembled without its smallest member: %d sectors (superblock now records %d sectors per member)", size, got, b.SBs[1].DataSectors)
			}
			bad := 0
			for s := uint64(0); s < min(size, got); s += step {
				if !bytes.Equal(pReadOne(t, rng, b, s, step), ref[s<<9:(s+step)<<9]) {
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d blocks of %d sectors read back wrong", bad, size/step, step)
			}
		})
	}
}
