package array

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// raid6: write E1 (P and Q in) to chunk B of stripe 1; its entry's X
// holds chunk C at its old value. P fails; write E2 to chunk C (RMW of Q
// only, L_P Unlogged). P re-added and rebuilt (right at the stripe).
// Power cut with both entries live. The replay, oldest first, writes P
// from E1 (over C's old value: wrong, C changed since), and E2, which
// the design counts on to put the parity of its newer data back, now
// leaves P alone: P stays wrong. A data member lost then rebuilds from
// that P wrong. Found by review; a newer entry now settles its rows of
// every parity part, an unlogged one too: no older entry writes them.
func TestParityLogUnloggedNewerEntrySettlesP(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	paths, a, g, r, h, _, _ := loggedParity(t, rng, engine.Level6, 6)

	const stripe, lo, hi = 1, 0, 8
	sm := g.Stripe(stripe)
	nd := uint64(g.DataMembers())
	pm := sm.P
	bIdx, cIdx := uint64(1), uint64(0)
	bMem := int(sm.Data[bIdx])
	off := int64(a.dataOffset + (stripe*g.ChunkSectors+lo)<<9)
	n := int(hi-lo) << 9
	aB := (stripe*nd+bIdx)*g.ChunkSectors + lo
	aC := (stripe*nd+cIdx)*g.ChunkSectors + lo

	write := func(sector uint64, buf []byte) {
		delete(r.done, 0)
		h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: sector, Sectors: hi - lo, Buf: buf})
		pServe(t, rng, h, r, []uint16{0})
		if err := r.done[0]; err != nil {
			t.Fatal(err)
		}
	}
	// E1: chunk B, every member in.
	newB := pageBuf(n)
	rng.Read(newB)
	write(aB, newB)

	if err := pDo(h, r, func() error { return a.Fail(pm) }); err != nil {
		t.Fatal(err)
	}
	// E2: chunk C, P out (RMW of Q alone, L_P unlogged).
	newC := pageBuf(n)
	rng.Read(newC)
	write(aC, newC)

	if err := pDo(h, r, func() error { return a.ReAdd(paths[pm]) }); err != nil {
		t.Fatal(err)
	}
	if err := pDo(h, r, func() error { a.WaitSync(); return nil }); err != nil {
		t.Fatal(err)
	}
	if st := a.Engine.State().Members[pm]; st.State != engine.MemberActive {
		t.Fatalf("P's member is %v after the re-add", st.State)
	}
	pStripeOK := func(a *Array) bool {
		x := make([]byte, n)
		var p []byte
		for m := range g.Members {
			if m == sm.Q {
				continue
			}
			c, err := a.Members[m].ReadBlock(off, n)
			if err != nil {
				t.Fatal(err)
			}
			if m == pm {
				p = c
				continue
			}
			for i := range x {
				x[i] ^= c[i]
			}
		}
		return bytes.Equal(x, p)
	}
	if !pStripeOK(a) {
		t.Fatal("P of the stripe wrong before the crash (the setup is wrong)")
	}
	snap := powerCutCopy(t, paths)
	a.Close()

	b, err := Open(snap, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t.Logf("warnings: %q", b.Warnings)
	pOK := pStripeOK(b)
	b.StopSync()
	if err := b.Fail(bMem); err != nil {
		t.Fatal(err)
	}
	if got := pReadOne(t, rng, b, aB, hi-lo); !bytes.Equal(got, newB) {
		t.Fatalf("P consistent after assembly: %v; chunk B (acknowledged write), its member lost after the crash, reads back wrong", pOK)
	}
	if !pOK {
		t.Fatal("P of the stripe does not match its data after the replay")
	}
}
