package array

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A degraded raid5's write that fails on a member kept as the last copy
// (its data write, or its parity write) fails its request, and must leave
// the stripe's other data as it was: the missing member's chunk, rebuilt
// from the parity, reads back what was last written to it (or fails),
// never something else. Before, the parity written with the failed data
// (or the data written with the failed parity) left the stripe's parity
// and data disagreeing, and the degraded read of the missing member's
// rows answered garbage. Now the stripe is healed from the write's log
// entry (engine/raid56_heal.go).
func TestParityWriteFailedOnLastCopyKeepsTheStripe(t *testing.T) {
	for _, fail := range []string{"data", "parity", "parity-stuck"} {
		t.Run(fail, func(t *testing.T) {
			rng := rand.New(rand.NewSource(5))
			paths := memberFiles(t, 4, 16<<20)
			a, err := Open(paths, CreateSpec{Level: engine.Level5, ChunkSectors: 16, AssumeClean: true, NoBitmap: true}, true)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			g := *a.Engine.Parity
			r := &pRing{done: map[uint16]error{}}
			h := a.newQueue(r)
			io := func(op uint8, sector uint64, buf []byte) error {
				delete(r.done, 0)
				h.Handle(&ublk.Request{Tag: 0, Op: op, Sector: sector, Sectors: uint32(len(buf) >> 9), Buf: buf})
				pServe(t, rng, h, r, []uint16{0})
				return r.done[0]
			}
			// Every sector written with known data, the array whole.
			span := g.ArraySectors()
			ref := make([]byte, span<<9)
			rng.Read(ref)
			for s := uint64(0); s < span; s += 128 {
				buf := pageBuf(128 << 9)
				copy(buf, ref[s<<9:])
				if err := io(ublk.IOOpWrite, s, buf); err != nil {
					t.Fatal(err)
				}
			}
			// A stripe with a data chunk on member 3, parity elsewhere;
			// member 3 lost.
			const lost = 3
			var stripe uint64
			for ; ; stripe++ {
				if m := g.Stripe(stripe); m.P != lost {
					break
				}
			}
			m := g.Stripe(stripe)
			nd := uint64(g.DataMembers())
			x := -1 // the member written: a data member other than the lost one
			for d := range int(nd) {
				if mem := int(m.Data[d]); mem != lost {
					x = mem
					break
				}
			}
			sectorOf := func(mem int) uint64 {
				for d := range int(nd) {
					if int(m.Data[d]) == mem {
						return (stripe*nd + uint64(d)) * g.ChunkSectors
					}
				}
				panic("not a data member")
			}
			if err := a.Fail(lost); err != nil {
				t.Fatal(err)
			}
			// The data member's writes keep failing (its rows read back);
			// the parity member fails one write (a heal's rewrite
			// succeeds).
			failed := false
			r.failOn = func(o engine.MemberIO) bool {
				if o.Kind != engine.IOWrite || o.Log {
					return false
				}
				if fail == "data" {
					return int(o.Member) == x
				}
				if int(o.Member) == m.P && (!failed || fail == "parity-stuck") {
					failed = true
					return true
				}
				return false
			}
			buf := pageBuf(4096)
			rng.Read(buf)
			err = io(ublk.IOOpWrite, sectorOf(x), buf)
			if !errors.Is(err, engine.ErrLastCopy) {
				t.Fatalf("a write that failed on the last copy: %v, want ErrLastCopy (states %v)", err, a.Engine.State().Members)
			}
			r.failOn = nil
			ps := a.Metrics("ublkb0").Parity
			if fail == "parity-stuck" {
				// The parity member keeps failing: the heal's write too.
				if !errors.Is(err, engine.ErrStripeUnhealed) || ps.Unhealed != 1 || ps.Healed != 0 {
					t.Fatalf("a stripe the heal could not write: %v, healed %d, unhealed %d", err, ps.Healed, ps.Unhealed)
				}
				return
			}
			if errors.Is(err, engine.ErrStripeUnhealed) || ps.Healed != 1 || ps.Unhealed != 0 {
				t.Fatalf("after the heal: %v, healed %d, unhealed %d", err, ps.Healed, ps.Unhealed)
			}
			if s := a.Engine.State().Members[x].State; s != engine.MemberActive {
				t.Fatalf("member %d is %v: the last copy was failed", x, s)
			}
			// The lost member's chunk, rebuilt from the others.
			got := pageBuf(int(g.ChunkSectors) << 9)
			s := sectorOf(lost)
			if err := io(ublk.IOOpRead, s, got); err == nil && !bytes.Equal(got, ref[s<<9:(s+g.ChunkSectors)<<9]) {
				t.Fatalf("the lost member's chunk in stripe %d reads back other data than was written to it", stripe)
			}
		})
	}
}
