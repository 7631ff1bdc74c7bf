package array

import (
	"bytes"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. Raid1 A (role 0), C (role 1) with a bitmap, never written. Split
// brain at the same events (the common case): A started alone and
// written at region 0 (0xaa), C started alone and not written there.
// A's bitmap block holding region 0 is torn (a power cut mid-batch). The
// forced assembly keeps A and rebuilds C "in full" from it (every region
// the kept side wrote). The bitmap loaded must say so of region 0: the
// region A wrote must be copied onto C. But loadBitmap passed C's copy
// (the other side's history: C is rebuilding, so writable) to
// bitmap.Load, which took the block from it where A's is torn: region 0
// read never written, the forced rebuild skipped it, and C, active after
// the rebuild, served its own side's data where A's was written.
// (Without C's copy, A's torn block makes the load fail and every region
// is taken dirty, which is safe.)
func TestForcedMemberBitmapCopyOverridesKeptSide(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20) // A, C
	a, err := Open(paths, CreateSpec{Name: "t", Level: engine.Level1, RegionSectors: testRegion}, true)
	if err != nil {
		t.Fatal(err)
	}
	stop(t, a)

	// A's side: alone, written at region 0.
	x := run(t, paths[:1], CreateSpec{})
	userWrite(t, x, []string{paths[0], ""}, 0, 64<<10, 0xaa)
	stop(t, x)
	// C's side: alone, as many generations, not written.
	for superblockOf(t, paths[1]).Events < superblockOf(t, paths[0]).Events {
		stop(t, run(t, paths[1:], CreateSpec{}))
	}
	if ea, ec := superblockOf(t, paths[0]).Events, superblockOf(t, paths[1]).Events; ea != ec {
		t.Fatalf("sides at events %d and %d, want equal", ea, ec)
	}

	// Tear A's bitmap block holding region 0.
	sb := superblockOf(t, paths[0])
	h := bitmapHeaderOf(t, paths[0])
	g, err := h.Geometry(sb.BitmapOffset, sb.BitmapBytes)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(paths[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0x5c}, 16)
	if _, err := f.WriteAt(junk, int64(g.BlockOffset(g.BlockOf(0)))+8); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// Forced: A (given first) kept, C rebuilt in full.
	b, err := Open(paths, CreateSpec{Force: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if st := b.Engine.State().Members; st[0].State != engine.MemberActive || st[1].State != engine.MemberRebuilding {
		t.Fatalf("roles %+v, want A active and C rebuilding", st)
	}
	written := b.Bitmap.Written(0)
	b.StartBackground()
	b.WaitSync()
	dA, dC := dataOf(t, b, paths[0])[:64<<10], dataOf(t, b, paths[1])[:64<<10]
	if !written || !bytes.Equal(dA, dC) {
		info := b.BitmapInfo
		t.Fatalf("forced assembly: region 0 (written by the kept side A) taken as written: %v (bitmap all dirty: %v, copies %+v); after the forced rebuild C (now %s) holds %#x there, A holds %#x: the other side's data is served as A's",
			written, info != nil && info.AllDirty, copiesOf(info), b.Engine.State().Members[1].State, dC[0], dA[0])
	}
}

func copiesOf(info *bitmap.LoadInfo) []string {
	if info == nil {
		return nil
	}
	var out []string
	for _, c := range info.Copies {
		s := "used"
		if c.Err != nil {
			s = c.Err.Error()
		}
		if len(c.BadBlocks) > 0 {
			s += " (bad blocks)"
		}
		out = append(out, s)
	}
	return out
}
