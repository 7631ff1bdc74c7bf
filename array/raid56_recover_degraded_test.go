package array

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A healthy raid5 not stopped cleanly, a write torn over data slots 1 and
// 2 (slot 2 new on disk, slot 1 old, P old), its entry on P's member. At
// assembly the member of slot 1 fails the read of its log area: it is
// failed, the array is now dirty and degraded, and the entry's written
// chunk on slot 1 is lost. The array starts, as without that member
// (md with PPL starts a dirty degraded array): slot 1 may read anything
// (md's PPL: the written part of a stripe), slot 0, which the write did
// not touch, reads back as it was, and slot 2 as written. (Both were
// refused as dirty degraded arrays until 2026-12-06.)
func TestParityLogReadFailureStartsDirtyDegraded(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	tw := tornRaid5Write(t, rng, true, 0)
	g, sm, sb := tw.g, tw.sm, tw.sb
	var d0, d2 int
	for m := range g.Members {
		switch sm.Slot[m] {
		case 0:
			d0 = m
		case 2:
			d2 = m
		}
	}
	// slot 1 (d1) back to old, slot 2 (d2) new; entry X = {slot 0}.
	devs := map[int]Device{}
	for _, m := range []int{tw.d1, d2, sm.P} {
		d, err := openFile(tw.paths[m])
		if err != nil {
			t.Fatal(err)
		}
		devs[m] = d
	}
	if err := devs[tw.d1].WriteAtDurable(tw.old[1], tw.off); err != nil {
		t.Fatal(err)
	}
	newD2 := make([]byte, tw.n)
	rng.Read(newD2)
	if err := devs[d2].WriteAtDurable(newD2, tw.off); err != nil {
		t.Fatal(err)
	}
	par, _ := engine.NewParity(g.DataMembers(), false)
	lp := make([]byte, tw.n)
	if err := par.LogParity(tw.old, 1, [][]byte{lp}); err != nil {
		t.Fatal(err)
	}
	e := engine.ParityLogEntry{Array: sb.ArrayUUID, Seq: tw.seq, Stripe: tornStripe, RowLo: tornLo, RowHi: tornHi, Logged: 1, Written: 6, Parity: 1, P: lp}
	b := make([]byte, engine.ParityLogEntrySize(tornHi-tornLo, 1))
	if _, err := e.Encode(b, g); err != nil {
		t.Fatal(err)
	}
	if err := devs[sm.P].WriteAtDurable(b, int64(sb.LogOffset)+3*4096); err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		d.Close()
	}
	readBack := func(name string, a *Array, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer a.Close()
		// The array sector of member m's rows.
		at := func(m int) uint64 {
			i := 0
			for int(sm.Data[i]) != m {
				i++
			}
			return tornStripe*g.ChunkSectors*uint64(g.DataMembers()) + uint64(i)*g.ChunkSectors + tornLo
		}
		if got := pReadOne(t, rng, a, at(d0), tornHi-tornLo); !bytes.Equal(got, tw.old[0]) {
			t.Fatalf("%s: the rows of slot 0, not written, do not read back as they were", name)
		}
		if got := pReadOne(t, rng, a, at(d2), tornHi-tornLo); !bytes.Equal(got, newD2) {
			t.Fatalf("%s: the rows of slot 2 do not read back as written", name)
		}
	}
	// Without d1's member.
	var give []string
	for m, p := range tw.paths {
		if m != tw.d1 {
			give = append(give, p)
		}
	}
	a, err := Open(give, CreateSpec{Level: -1}, false)
	readBack("without the written chunk's member", a, err)
	logLo, logHi := int64(sb.LogOffset), int64(sb.LogOffset+sb.LogBytes)
	spec := CreateSpec{Level: -1, OpenDevice: func(p string) (Device, error) {
		d, err := openFile(p)
		if err != nil || p != tw.paths[tw.d1] {
			return d, err
		}
		return offFailDev{Device: d, fail: func(int64) bool { return false }, failRead: func(off int64) bool { return off >= logLo && off < logHi }}, nil
	}}
	// A member failing the read of its log area is failed: the same.
	a, err = Open(tw.paths, spec, false)
	readBack("with a member failing its log area's read", a, err)
}
