package array

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// raid10 offset layouts grow like near ones, as md's raid10_resize allows
// (it refuses only far): an offset layout's far copies are one chunk
// apart, not a far section apart, so no copy moves with the member size.
// The data written before the grow reads back the same after it, and
// after reassembly, and the added space holds what is written to it.
func TestGrowRAID10Offset(t *testing.T) {
	for _, layout := range []engine.Layout{engine.LayoutO2, engine.LayoutO3} {
		t.Run(layout.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(1))
			paths := memberFiles(t, 4, 16<<20)
			a, err := Open(paths, CreateSpec{Level: engine.Level10, Layout: layout, ChunkSectors: 128, AssumeClean: true}, true)
			if err != nil {
				t.Fatal(err)
			}
			const step = 128
			write := func(a *Array, ref []byte, from, to uint64) {
				t.Helper()
				r := &pRing{done: map[uint16]error{}}
				h := a.newQueue(r)
				for s := from; s < to; s += step {
					buf := pageBuf(step << 9)
					copy(buf, ref[s<<9:])
					delete(r.done, 0)
					h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: s, Sectors: step, Buf: buf})
					pServe(t, rng, h, r, []uint16{0})
					if err := r.done[0]; err != nil {
						t.Fatal(err)
					}
				}
			}
			verify := func(a *Array, ref []byte, to uint64, when string) {
				t.Helper()
				bad := 0
				for s := uint64(0); s < to; s += step {
					if !bytes.Equal(pReadOne(t, rng, a, s, step), ref[s<<9:(s+step)<<9]) {
						bad++
					}
				}
				if bad > 0 {
					t.Fatalf("%s: %d of %d blocks read back wrong", when, bad, to/step)
				}
			}
			old := a.Engine.Geo.ArraySectors()
			ref := make([]byte, 64<<20)
			rng.Read(ref)
			write(a, ref, 0, old)
			if err := a.SetClean(true); err != nil {
				t.Fatal(err)
			}
			a.Close()
			growFiles(t, paths, 48<<20)
			if a, err = Open(paths, CreateSpec{}, false); err != nil {
				t.Fatal(err)
			}
			p, err := a.Grow(32 << 11)
			if err != nil {
				t.Fatal(err)
			}
			size := a.Engine.Geo.ArraySectors()
			if size <= old || p.NewArraySectors != size {
				t.Fatalf("plan %+v: array %d sectors, was %d", p, size, old)
			}
			verify(a, ref, old, "after the grow")
			write(a, ref, old, size)
			verify(a, ref, size, "after writing the added space")
			if err := a.SetClean(true); err != nil {
				t.Fatal(err)
			}
			a.Close()
			if a, err = Open(paths, CreateSpec{}, false); err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if got := a.Engine.Geo.ArraySectors(); got != size {
				t.Fatalf("reassembled at %d sectors, grown to %d", got, size)
			}
			verify(a, ref, size, "after reassembly")
		})
	}
}
