package array

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// flipChunkByte flips a byte of member's chunk of stripe s, at byte at of
// the chunk (pCorrupt for any member).
func flipChunkByte(t *testing.T, a *Array, member int, s, at uint64) {
	t.Helper()
	g := *a.Engine.Parity
	b := pageBuf(512)
	off := int64(a.dataOffset + (s*g.ChunkSectors+at/512)<<9)
	m := a.Members[member]
	if err := m.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[at%512] ^= 0x40
	if err := m.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// raid6Left returns, for lost member l, the parity member left to check
// in stripe s (md's handle_parity_checks6: P with Q lost; Q with P or a
// data member lost).
func raid6Left(g engine.ParityGeometry, l int, s uint64) int {
	if sm := g.Stripe(s); sm.Q != l {
		return sm.Q
	}
	return g.Stripe(s).P
}

// A raid6 with one member failed is checked and repaired around it, as
// md does: a check counts 0 on a consistent array, then one row each of
// the parity left wrong in a stripe where the lost member holds data (Q
// wrong: the data is rebuilt from P), P (Q wrong) and Q (P wrong), and
// writes nothing; a repair rewrites them (a check then counts 0), so that
// with a second member lost, holding data in all three stripes, reads
// (rebuilt from the repaired parity) return the data written.
func TestRaid6CheckRepairOneMemberOut(t *testing.T) {
	rng := rand.New(rand.NewSource(61))
	const span = 2048
	a, paths, h, r, ref, id := parityGarbageArray(t, rng, engine.Level6, 6, span)
	defer a.Close()
	pWhileSync(t, rng, a, h, r, ref, span, id)
	g := *a.Engine.Parity
	per := g.ChunkSectors * uint64(g.DataMembers())
	const lost = 0
	var sData, sP, sQ int64 = -1, -1, -1
	for s := range span / per {
		sm := g.Stripe(s)
		switch {
		case sm.P == lost && sP < 0:
			sP = int64(s)
		case sm.Q == lost && sQ < 0:
			sQ = int64(s)
		case sm.Slot[lost] >= 0 && sData < 0:
			sData = int64(s)
		}
	}
	if sData < 0 || sP < 0 || sQ < 0 {
		t.Fatalf("stripes with member %d as data, P, Q: %d %d %d", lost, sData, sP, sQ)
	}
	stripes := []uint64{uint64(sData), uint64(sP), uint64(sQ)}
	second := -1 // a data member of all three stripes
	for m := range g.Members {
		ok := m != lost
		for _, s := range stripes {
			ok = ok && g.Stripe(s).Slot[m] >= 0
		}
		if ok {
			second = m
			break
		}
	}
	if second < 0 {
		t.Fatal("no member holds data in all three stripes")
	}
	if err := a.Fail(lost); err != nil {
		t.Fatal(err)
	}
	check := func(repair bool, want uint64, what string) {
		t.Helper()
		if err := a.Check(repair); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		a.WaitSync()
		if s := a.SyncStatus(); s.LastCheckResult != "ok" || s.MismatchCnt != want {
			t.Fatalf("%s: %+v, want mismatch_cnt %d", what, s, want)
		}
	}
	check(false, 0, "check of a consistent raid6, a member failed")
	for i, s := range stripes {
		flipChunkByte(t, a, raid6Left(g, lost, s), s, uint64(i%2)*4096+77)
	}
	before := fileBytes(t, paths...)
	check(false, 3*8, "check of three wrong rows of the parity left")
	for i, b := range fileBytes(t, paths...) {
		if !bytes.Equal(b[a.dataOffset:], before[i][a.dataOffset:]) {
			t.Fatalf("check wrote member %d", i)
		}
	}
	check(true, 3*8, "repair of three wrong rows of the parity left")
	after := fileBytes(t, paths...)
	if !bytes.Equal(after[lost][a.dataOffset:], before[lost][a.dataOffset:]) {
		t.Fatal("the repair wrote the failed member")
	}
	check(false, 0, "check after the repair")
	if err := a.Fail(second); err != nil {
		t.Fatal(err)
	}
	pReadAll(t, rng, h, r, ref, span)
}

// uncleanRaid6 makes a raid6 of 6 members (with a spare, if spare) that
// crashed while regions 2-3 were dirty, a torn write having left wrong
// the parity of their stripes that stays when member missing is lost (Q
// where it holds data or P, P where it holds Q), and returns the members'
// paths, their bytes before the parity was made wrong, and the stripes
// made wrong. The caller assembles it without member missing.
func uncleanRaid6(t *testing.T, rng *rand.Rand, missing int, spare bool) (paths, spares []string, want [][]byte, wrong []uint64, ref []byte) {
	t.Helper()
	const span = 4096
	a, paths, h, r, ref, id := parityGarbageArray(t, rng, engine.Level6, 6, span)
	defer a.Close()
	pWhileSync(t, rng, a, h, r, ref, span, id)
	if spare {
		spares = memberFiles(t, 1, 16<<20)
		if err := pDo(h, r, func() error { return a.AddSpare(spares[0]) }); err != nil {
			t.Fatal(err)
		}
	}
	g := *a.Engine.Parity
	rs := a.Bitmap.Geometry().RegionSectors
	per := g.ChunkSectors * uint64(g.DataMembers())
	for !a.Bitmap.StartWrite(2, 3, 0) {
		a.fl.do(func() {})
	}
	a.fl.do(func() {})
	persistLogCheckpoint(t, a)
	want = fileBytes(t, paths...)
	for s := 2 * rs / per; s < 4*rs/per; s++ {
		flipChunkByte(t, a, raid6Left(g, missing, s), s, (s%2)*4096+300)
		wrong = append(wrong, s)
	}
	return paths, spares, want, wrong, ref // (closed: the write never ended)
}

// An unclean raid6 assembled with one member missing resyncs the regions
// its bitmap had dirty, around the missing member (md resyncs a raid6
// degraded by less than its parity covers), instead of waiting for a
// rebuild: the parity left wrong in those stripes is rewritten from the
// data, the data rebuilt from P where the member held it; the missing
// member is not written.
func TestRaid6UncleanOneMissingResyncs(t *testing.T) {
	rng := rand.New(rand.NewSource(62))
	const missing = 1
	paths, _, want, wrong, ref := uncleanRaid6(t, rng, missing, false)
	var rest []string
	for i, p := range paths {
		if i != missing {
			rest = append(rest, p)
		}
	}
	a, err := Open(rest, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if m := a.Engine.State().Members[missing]; m.State != engine.MemberMissing {
		t.Fatalf("member %d assembled %s", missing, m.State)
	}
	if !a.Bitmap.NeedsSync(2) || !a.Bitmap.NeedsSync(3) {
		t.Fatal("the dirty regions do not need sync after the crash")
	}
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	a.StartBackground()
	a.WaitSync()
	if s := a.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
		t.Fatalf("an unclean raid6 with a member missing after StartBackground: %+v", s)
	}
	g := *a.Engine.Parity
	got := fileBytes(t, paths...)
	cb := g.ChunkSectors << 9
	for _, s := range wrong {
		m := raid6Left(g, missing, s)
		off := a.dataOffset + s*cb
		if !bytes.Equal(got[m][off:off+cb], want[m][off:off+cb]) {
			t.Fatalf("stripe %d: member %d's parity not rewritten by the resync", s, m)
		}
	}
	if !bytes.Equal(got[missing][a.dataOffset:], want[missing][a.dataOffset:]) {
		t.Fatal("the missing member's data was written")
	}
	pReadAll(t, rng, h, r, ref, 4096)
}

// As above with a spare at assembly: the spare takes the missing role
// before the resync starts (its rebuild goes first, as md's recovery
// interrupts a resync), and the resync follows it.
func TestRaid6UncleanOneMissingSpareFirst(t *testing.T) {
	rng := rand.New(rand.NewSource(63))
	const missing = 1
	paths, spares, _, _, ref := uncleanRaid6(t, rng, missing, true)
	var rest []string
	for i, p := range paths {
		if i != missing {
			rest = append(rest, p)
		}
	}
	a, err := Open(append(rest, spares...), CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if st := a.Status(); st.SpareDisks != 1 {
		t.Fatalf("assembled: %+v", st)
	}
	before := make(chan string, 1) // the last job when the spare took the role
	a.OnSpareActivated = func(role int, path string, err error) {
		if err != nil || role != missing {
			t.Errorf("spare activation: role %d, %v", role, err)
		}
		select {
		case before <- a.SyncStatus().LastAction:
		default:
		}
	}
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	a.StartBackground()
	a.WaitSync()
	select {
	case last := <-before:
		if last != "" {
			t.Fatalf("the spare took the role after a %s", last)
		}
	default:
		t.Fatal("the spare never took the role")
	}
	if s := a.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
		t.Fatalf("after the spare's rebuild: %+v", s)
	}
	if st := a.Status(); st.State != "active" || st.SpareDisks != 0 {
		t.Fatalf("after the spare's rebuild and the resync: %+v", st)
	}
	pConsistent(t, a, 4096)
	pReadAll(t, rng, h, r, ref, 4096)
}
