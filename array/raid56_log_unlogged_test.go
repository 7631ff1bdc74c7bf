package array

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// raid6, the P member of stripe 1 failed (durably). A write of one data
// chunk's rows there is a read-modify-write of Q alone: logRMW leaves the
// entry's L_P zero ("a parity member not read (lost) leaves its part
// zero: it is not written either"), and the entry goes to Q's member. P's
// device is then re-added and rebuilt (P right again at the stripe), and
// the power is cut while the entry is still live (the checkpointer had
// not passed it yet). The assembly replays the entry onto every writable
// parity member: P gets L_P (zero) + the parity of the data outside X,
// which is not the stripe's parity. A data member lost afterwards (before
// any resync) is rebuilt from that P: data nobody was writing is wrong.
// Found by review. Now the entry says L_P was not computed
// (engine.ParityLogEntry.Unlogged) and the replay leaves P as it is.
func TestParityLogUnloggedPNotReplayed(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	paths, a, g, r, h, _, _ := loggedParity(t, rng, engine.Level6, 6)

	const stripe, lo, hi = 1, 0, 8
	sm := g.Stripe(stripe)
	nd := uint64(g.DataMembers())
	pm := sm.P
	bIdx, cIdx := uint64(1), uint64(0)
	cMem := int(sm.Data[cIdx])
	off := int64(a.dataOffset + (stripe*g.ChunkSectors+lo)<<9)
	n := int(hi-lo) << 9
	oldC, err := a.Members[cMem].ReadBlock(off, n)
	if err != nil {
		t.Fatal(err)
	}
	aB := (stripe*nd+bIdx)*g.ChunkSectors + lo
	aC := (stripe*nd+cIdx)*g.ChunkSectors + lo

	if err := pDo(h, r, func() error { return a.Fail(pm) }); err != nil {
		t.Fatal(err)
	}
	newB := pageBuf(n)
	rng.Read(newB)
	delete(r.done, 0)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: aB, Sectors: hi - lo, Buf: newB})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}
	// P's device back: re-added, rebuilt.
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
	// The power cut.
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
	if err := b.Fail(cMem); err != nil {
		t.Fatal(err)
	}
	if got := pReadOne(t, rng, b, aC, hi-lo); !bytes.Equal(got, oldC) {
		t.Fatalf("P consistent after assembly: %v; the rows of a data chunk nobody wrote, its member lost after the crash, read back wrong", pOK)
	}
	if !pOK {
		t.Fatal("P of the stripe does not match its data after the replay")
	}
}
