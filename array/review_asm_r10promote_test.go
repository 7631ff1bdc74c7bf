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

// TestReviewAsmRaid10PromotedNoBitmapCopiesDiffer (found by review): raid10 near2 of 3
// members without a bitmap (chunk 0 on members 0 and 1, chunk 2 on 1 and
// 2). Member 1 drops out by I/O errors (its own superblock never records
// it); chunk 0 is rewritten (member 0 only); the array is stopped
// cleanly; member 2 is lost. --force puts member 1 in sync as it is
// (chunk 2 has no other copy). Its copy of chunk 0 is the old data, member
// 0's the new, acknowledged one: the README says the resync makes a
// promoted raid10 member's copies one again ("the bitmap resync (after
// any rebuild) makes them one ... reads of those regions are served from
// that copy until then"). Without a bitmap, nothing does: the array is
// clean, no full resync is pending, and reads of chunk 0 balance between
// the new copy and the stale one.
func TestReviewAsmRaid10PromotedNoBitmapCopiesDiffer(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 16, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	const span = 6 * 16 // six chunks, two rows
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
	neu := make([]byte, 16<<9) // chunk 0: members 0 and 1
	rng.Read(neu)
	pWriteOne(t, rng, a, 0, neu)
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()

	// Member 2 is lost; force starts the array from 0 and 1.
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
		t.Fatalf("member 1 not put in sync as it is: warnings %q", a.Warnings)
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
	pending, _ := a.fullResync()
	if !bytes.Equal(d0[:16<<9], d1[:16<<9]) && !pending && !a.needsResync() {
		// Which copy a read takes decides what the user sees: a read of
		// chunk 0 while member 0 is busy with one of chunk 1 (its only
		// copy) goes to member 1.
		r := &pRing{done: map[uint16]error{}}
		h := a.newQueue(r)
		busy, got := pageBuf(16<<9), pageBuf(16<<9)
		h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: 16, Sectors: 16, Buf: busy})
		h.Handle(&ublk.Request{Tag: 1, Op: ublk.IOOpRead, Sector: 0, Sectors: 16, Buf: got})
		pServe(t, rng, h, r, []uint16{0, 1})
		if r.done[1] != nil {
			t.Fatal(r.done[1])
		}
		t.Fatalf("after the forced start, the two copies of chunk 0 differ (member 0 has the acknowledged write, member 1 the data from before it left) and no resync is pending to make them one (full resync pending %v); a read of chunk 0 returned the old data: %v, the acknowledged data: %v",
			pending, bytes.Equal(got, old[:16<<9]), bytes.Equal(got, neu))
	}
}
