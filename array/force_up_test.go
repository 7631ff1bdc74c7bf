package array

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// pWriteOne writes b at array sector sector through a new queue of a.
func pWriteOne(t *testing.T, rng *rand.Rand, a *Array, sector uint64, b []byte) {
	t.Helper()
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	buf := pageBuf(len(b))
	copy(buf, b)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: sector, Sectors: uint32(len(b) >> 9), Buf: buf})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}
}

// TestForceUpStaleRaid5Member: raid5 of 3; member 2 drops out by I/O
// errors (its own superblock never records it), writes go on to the
// first half of the data, then a power cut takes member 1. Members 0 and
// 2 cannot start the array without --force (one in sync of three); with
// it, member 2 is put in sync as it is (mdadm's "forcing event count"),
// said in a warning, and its superblock takes the array's generation:
// the array starts degraded; where nothing was written since member 2
// left, every chunk reads back, member 1's rebuilt from 0 and 2; where
// the writes went on, member 0's chunks read the new data and member 2's
// the old (the writes it missed are lost). Before, force put member 2
// back for a full rebuild from member 0 alone, and the assembly was
// refused (1 of 3 members active).
func TestForceUpStaleRaid5Member(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	paths, a, old, keep := droppedRaid5Member(t, rng, 2)
	g := *a.Engine.Parity
	staleEvents := a.SBs[0].Events - 1
	sb := *a.SBs[0]
	logArea := func(b []byte) []byte {
		return b[sb.LogOffset+engine.ParityLogHeaderSize : sb.LogOffset+sb.LogBytes]
	}
	zero := func(b []byte) bool { return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }
	if zero(logArea(keep)) {
		t.Fatal("member 2's write-hole log area holds no entry: the test proves nothing of it")
	}
	neu := make([]byte, droppedSpan/2<<9)
	rng.Read(neu)
	pWriteOne(t, rng, a, 0, neu)
	a.Close() // power cut: not stopped cleanly; member 1 is lost with it
	events := a.events

	give := []string{paths[0], paths[2]}
	before := fileBytes(t, give...)
	if x, err := Open(give, CreateSpec{Level: -1}, false); err == nil {
		x.Close()
		t.Fatal("unforced: started with one member in sync of three")
	}
	if !bytes.Equal(bytes.Join(before, nil), bytes.Join(fileBytes(t, give...), nil)) {
		t.Fatal("unforced: refused, yet members written")
	}

	a, err := Open(give, CreateSpec{Level: -1, Force: true}, false)
	if err != nil {
		t.Fatalf("forced: %v", err)
	}
	defer func() { a.Close() }()
	want := fmt.Sprintf("forcing event count in %s(2) from %d up to %d", paths[2], staleEvents, events)
	said := false
	for _, w := range a.Warnings {
		said = said || strings.Contains(w, want)
	}
	if !said {
		t.Errorf("warnings %q, want %q", a.Warnings, want)
	}
	if st := a.Engine.State().Members; st[0].State != engine.MemberActive || st[1].State != engine.MemberMissing || st[2].State != engine.MemberActive {
		t.Fatalf("member states %+v", st)
	}
	// Its log area, from before it left, is emptied: not replayed by a
	// later assembly over the stripes written since.
	if !zero(logArea(fileBytes(t, paths[2])[0])) {
		t.Error("member 2's write-hole log area still holds its old entries")
	}
	a.StopSync()
	got := pReadOne(t, rng, a, 0, droppedSpan)
	for s := uint64(0); s < droppedSpan; s += g.ChunkSectors {
		stripe, _, m, _ := g.LocateData(s)
		w := old[s<<9 : (s+g.ChunkSectors)<<9]
		switch {
		case s < droppedSpan/2 && m == 1:
			continue // written since, rebuilt from a stale member: anything
		case s < droppedSpan/2 && m == 0:
			w = neu[s<<9 : (s+g.ChunkSectors)<<9]
		}
		if !bytes.Equal(got[s<<9:(s+g.ChunkSectors)<<9], w) {
			t.Errorf("sector %d (stripe %d, member %d) does not read back", s, stripe, m)
		}
	}
	// Its superblock took the array's generation: the next assembly
	// trusts it without --force.
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if a, err = Open(give, CreateSpec{Level: -1}, false); err != nil {
		t.Fatalf("after the forced start, unforced: %v", err)
	}
}

// droppedSpan is how many sectors droppedRaid5Member writes: 8 stripes
// of two 16-sector data chunks.
const droppedSpan = 8 * 32

// droppedRaid5Member creates a raid5 of 3 member files (16-sector
// chunks), writes droppedSpan sectors of random data (old) at sector 0,
// and drops member drop out of it with its superblock as it was (an I/O
// error writes nothing on it; Fail records the failure on it too, so its
// file is put back as it was before, keep). The array stays open.
func droppedRaid5Member(t *testing.T, rng *rand.Rand, drop int) (paths []string, a *Array, old, keep []byte) {
	t.Helper()
	paths = memberFiles(t, 3, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ChunkSectors: 16, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	old = make([]byte, droppedSpan<<9)
	rng.Read(old)
	pWriteOne(t, rng, a, 0, old)
	if keep, err = os.ReadFile(paths[drop]); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(drop); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[drop], keep, 0o600); err != nil {
		t.Fatal(err)
	}
	return paths, a, old, keep
}
