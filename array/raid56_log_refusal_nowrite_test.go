package array

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A dirty raid5 (every member present, not forced) with two live entries:
// the torn write's on stripe 1 (it needs d1's rows), and a newer
// header-only one on stripe 5. d1 fails the read of its stripe 1 rows
// during the replay: the entry is left and the assembly refused
// (ErrDirtyDegraded), "before anything is written" (recoverParityLog's
// doc; the old code computed every entry first). The newest-first replay
// (4b47831) had written stripe 5's parity by then. Found by review; a
// dirty assembly that was not forced is read through first, writing
// nothing.
func TestParityLogDirtyRefusalWritesNothing(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	tw := tornRaid5Write(t, rng, true, 0)
	g, sm, sb := tw.g, tw.sm, tw.sb
	const s2 = tornStripe + 4
	sm2 := g.Stripe(s2)
	if sm2.P != sm.P {
		t.Fatalf("stripe %d's P %d, stripe %d's %d", s2, sm2.P, tornStripe, sm.P)
	}
	pd, err := openFile(tw.paths[sm.P])
	if err != nil {
		t.Fatal(err)
	}
	e := engine.ParityLogEntry{Array: sb.ArrayUUID, Seq: tw.seq + 1, Stripe: s2, RowLo: 0, RowHi: 8, Logged: 0, Written: 1, Parity: 1}
	b := make([]byte, engine.ParityLogEntrySize(0, 1))
	if _, err := e.Encode(b, g); err != nil {
		t.Fatal(err)
	}
	if err := pd.WriteAtDurable(b, int64(sb.LogOffset)+5*4096); err != nil {
		t.Fatal(err)
	}
	// Stripe 5's P rows as the crash left them (torn: not the data's).
	off2 := int64(sb.DataOffset + (s2*g.ChunkSectors)<<9)
	junk := make([]byte, 8<<9)
	rng.Read(junk)
	if err := pd.WriteAtDurable(junk, off2); err != nil {
		t.Fatal(err)
	}
	pd.Close()
	lo, hi := tw.off, tw.off+int64(tw.n)
	spec := CreateSpec{Level: -1, OpenDevice: func(p string) (Device, error) {
		d, err := openFile(p)
		if err != nil || p != tw.paths[tw.d1] {
			return d, err
		}
		return offFailDev{Device: d, fail: func(int64) bool { return false }, failRead: func(off int64) bool { return off < hi && off >= lo }}, nil
	}}
	a, err := Open(tw.paths, spec, false)
	if err == nil {
		a.Close()
	}
	if !errors.Is(err, engine.ErrDirtyDegraded) {
		t.Fatalf("assembly with d1 failing its stripe 1 rows: %v, want the dirty refusal", err)
	}
	refusal := err
	pd, err = openFile(tw.paths[sm.P])
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	got := make([]byte, len(junk))
	if err := pd.ReadAt(got, off2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, junk) {
		t.Fatalf("the refused dirty assembly (%v) wrote stripe %d's parity before refusing", refusal, s2)
	}
}
