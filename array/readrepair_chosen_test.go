package array

import (
	"bytes"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. A read repair rewrites the bad copy with the data the read returned: in
// a range awaiting resync that is the lowest-numbered readable copy the
// read did not fail on (engine.LowestMember, retried past the failed
// copy), which is also the copy resync copies from. On raid10 with three
// copies md's slot order is not member order (n3 on 4 members: chunk 1 is
// on members 3, 0, 1): taking the first good copy in slot order writes
// member 3's data over member 0, the chosen copy, so the next read of the
// range answers member 3's data where the one before answered member 1's,
// with no write in between.
func TestReadRepairCopiesTheCopyTheReadReturned(t *testing.T) {
	paths := memberFiles(t, 4, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level10, Layout: engine.LayoutN3, ChunkSectors: 8, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g := a.Engine.Geo
	const sector, n = 8, 8 // chunk 1
	var buf [engine.MaxCopies]engine.Location
	locs := g.Locate(sector, buf[:0])
	if want := []engine.Location{{Member: 3, Sector: 0}, {Member: 0, Sector: 8}, {Member: 1, Sector: 8}}; !slices.Equal(locs, want) {
		t.Fatalf("chunk 1 is at %v, want %v", locs, want)
	}
	fill := map[int]byte{0: 0xee, 1: 0x11, 3: 0x33} // member 0: the chosen copy, whose read failed
	for _, l := range locs {
		scribble(t, a, paths[l.Member], int64(l.Sector)<<9, n<<9, fill[l.Member])
	}
	// What a retried read of the range awaiting resync answers with
	// member 0 ruled out: the lowest-numbered copy left.
	var lm engine.LowestMember
	ok := uint32(0)
	for i, l := range locs {
		if l.Member != 0 {
			ok |= 1 << uint(i)
		}
	}
	read := locs[lm.Pick(locs, ok, n)].Member
	if read != 1 {
		t.Fatalf("the retried read goes to member %d, want 1", read)
	}

	a.requestRepair(sector, n, 1<<0)
	waitFor(t, "the repair ran", func() bool { return a.ReadRepairs() == 1 })
	got := dataOf(t, a, paths[0])[8<<9 : (8+n)<<9]
	if want := bytes.Repeat([]byte{fill[read]}, n<<9); !bytes.Equal(got, want) {
		t.Fatalf("member 0 holds %#x after the repair, want member %d's %#x (what the read returned)", got[0], read, fill[read])
	}
}
