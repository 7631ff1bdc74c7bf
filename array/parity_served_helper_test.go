package array

import (
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// servedParity is a new raid5/6 array of members 16 MiB files (chunk 16
// sectors, bitmap regions of 128 unless noBitmap), served by one queue,
// after a batch of pBatch over its first span sectors (ref holds what it
// wrote) and the initial resync. Returns the array, its member paths, the
// queue and ring, ref and the write id counter.
func servedParity(t *testing.T, rng *rand.Rand, level engine.Level, members int, span uint64, noBitmap bool) (*Array, []string, *queue, *pRing, []byte, *uint64) {
	t.Helper()
	paths := memberFiles(t, members, 16<<20)
	spec := CreateSpec{Level: level, ChunkSectors: 16, RegionSectors: 128, NoBitmap: noBitmap}
	if noBitmap {
		spec.RegionSectors = 0
	}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		a.Close()
		t.Fatal(err)
	}
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	ref := make([]byte, a.Engine.Parity.ArraySectors()<<9)
	id := new(uint64)
	pBatch(t, rng, h, r, ref, span, id)
	a.WaitSync()
	return a, paths, h, r, ref, id
}
