package array

import (
	"bytes"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// TestReviewAsmRaid10PromotedAfterRefillStaleRead (found by review): raid10 near2 of 3
// members with a bitmap (chunk 0 on members 0 and 1, chunk 2 on 1 and
// 2). Member 1 (B) drops out by I/O errors (its own superblock never
// records it) and is replaced by S, rebuilt in full; chunk 0 is
// rewritten (members 0 and S); a clean stop clears the idle regions.
// Then S and member 2 are lost. --force puts B in sync as it is (chunk 2
// has no other copy). The README: "a chunk it holds beside a member in
// sync differs between the two copies where written since it left
// (regions the bitmap has dirty), and the bitmap resync (after any
// rebuild) makes them one". But the regions written since it left were
// cleared while S held the role (md's events_cleared rule, which re-add
// follows: its events are older than the bitmap's events cleared), so
// no resync covers them: B's copy of chunk 0 stays the old data beside
// member 0's acknowledged one, and a read can return it.
func TestReviewAsmRaid10PromotedAfterRefillStaleRead(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths[:3], CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 16, AssumeClean: true, RegionSectors: testRegion}, true)
	if err != nil {
		t.Fatal(err)
	}
	const span = 6 * 16
	old := make([]byte, span<<9)
	rng.Read(old)
	pWriteOne(t, rng, a, 0, old)
	keep, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[1], keep, 0o600); err != nil { // dropped by I/O errors: its superblock as it was
		t.Fatal(err)
	}
	if err := a.Replace(1, paths[3]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if st := a.Status(); st.ActiveDisks != 3 {
		t.Fatalf("after replace: %+v", st)
	}
	neu := make([]byte, 16<<9) // chunk 0: members 0 and S
	rng.Read(neu)
	pWriteOne(t, rng, a, 0, neu)
	if err := a.SetClean(true); err != nil { // clears the idle regions
		t.Fatal(err)
	}
	a.Close()

	// S and member 2 are lost; force starts the array from 0 and B.
	give := []string{paths[0], paths[1]}
	a, err = Open(give, CreateSpec{Level: -1, Force: true}, false)
	if err != nil {
		t.Fatalf("forced: %v", err)
	}
	defer func() { a.Close() }()
	promoted := false
	for _, w := range a.Warnings {
		promoted = promoted || strings.Contains(w, "forcing event count")
	}
	if !promoted {
		t.Fatalf("B not put in sync as it is: warnings %q", a.Warnings)
	}
	if err := a.SetClean(false); err != nil { // as the daemon starts it
		t.Fatal(err)
	}
	a.StartBackground() // as the daemon does once the device serves
	a.WaitSync()
	d0, d1 := dataOf(t, a, paths[0]), dataOf(t, a, paths[1])
	if !bytes.Equal(d0[:16<<9], neu) {
		t.Fatal("member 0 lost the acknowledged write")
	}
	if bytes.Equal(d0[:16<<9], d1[:16<<9]) {
		return // made one
	}
	// A read of chunk 0 while member 0 is busy with one of chunk 1 (its
	// only copy) goes to B.
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	busy, got := pageBuf(16<<9), pageBuf(16<<9)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: 16, Sectors: 16, Buf: busy})
	h.Handle(&ublk.Request{Tag: 1, Op: ublk.IOOpRead, Sector: 0, Sectors: 16, Buf: got})
	pServe(t, rng, h, r, []uint16{0, 1})
	if r.done[1] != nil {
		t.Fatal(r.done[1])
	}
	t.Fatalf("after the forced start and its resync, the two copies of chunk 0 differ (member 0 has the acknowledged write, B the data from before it left; the bitmap regions written meanwhile were cleared while S held the role, and resync pending %v); a read of chunk 0 returned the old data: %v, the acknowledged data: %v",
		a.needsResync(), bytes.Equal(got, old[:16<<9]), bytes.Equal(got, neu))
}
