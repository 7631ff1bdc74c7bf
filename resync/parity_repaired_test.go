package resync

import (
	"context"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// TestParityRepairCountsRowsFixed (found by review): a repair of a raid5/6 array in
// which one 4 KiB row of P is wrong fixes one row, and must count one
// (Result.Repaired: "4 KiB block writes to copies that differed"), not
// every row of the 256 KiB piece it rewrote.
func TestParityRepairCountsRowsFixed(t *testing.T) {
	for _, lvl := range []engine.Level{engine.Level5, engine.Level6} {
		g := engine.ParityGeometry{Level: lvl, Members: 5, Layout: engine.LeftSymmetric, ChunkSectors: 2048, MemberSectors: 3 * 2048}
		arr, err := engine.NewParityArray(g)
		if err != nil {
			t.Fatal(err)
		}
		mem := newParityMem(g)
		mem.fillRandom(11)
		bar := &stripeBarrier{}
		s := New(arr, bar, lockedMembers{mem, g, bar}, Config{})
		ctx := context.Background()
		if _, err := s.Run(ctx, Job{Kind: Resync}); err != nil {
			t.Fatal(err)
		}
		if n := parityRowsWrong(t, g, mem); n != 0 {
			t.Fatalf("%s: %d rows wrong after resync", lvl, n)
		}
		// One byte of one P row of stripe 1.
		sm := g.Stripe(1)
		mem.cache[sm.P][(1*g.ChunkSectors+40*8)<<9+17] ^= 0x20
		res, err := s.Run(ctx, Job{Kind: Repair})
		if err != nil {
			t.Fatal(err)
		}
		if n := parityRowsWrong(t, g, mem); n != 0 {
			t.Fatalf("%s: %d rows wrong after repair", lvl, n)
		}
		if res.Mismatches != 1 || res.Repaired != 1 {
			t.Errorf("%s: repair of one wrong P row: Mismatches %d, Repaired %d; want 1 and 1", lvl, res.Mismatches, res.Repaired)
		}
	}
}
