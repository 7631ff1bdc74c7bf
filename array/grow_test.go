package array

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

func growFiles(t *testing.T, paths []string, size int64) {
	t.Helper()
	for _, p := range paths {
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
	}
}

func fileSums(t *testing.T, paths []string) [][32]byte {
	t.Helper()
	var out [][32]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sha256.Sum256(b))
	}
	return out
}

// writeAt writes p at array sector s through the members (raid1: every
// member at the data offset), as the array would, for checks of the data
// after grow.
func raid1Write(t *testing.T, a *Array, s uint64, p []byte) {
	t.Helper()
	for _, m := range a.Members {
		if err := m.WriteAt(p, int64(a.dataOffset+s<<9)); err != nil {
			t.Fatal(err)
		}
	}
}

// Grow raid1 into larger members: the superblocks record the new data
// area, the bitmap keeps its old regions' states and adds never-written
// ones (no initial sync), and the next assembly is the grown array.
func TestGrowRAID1Max(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	old := a.Engine.Geo.ArraySectors()
	regions := a.Bitmap.Geometry().Regions
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	growFiles(t, paths, 40<<20)
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	if got := a.Engine.Geo.ArraySectors(); got != old {
		t.Fatalf("larger members grew the array at assembly: %d sectors, was %d", got, old)
	}
	pattern := bytes.Repeat([]byte{0x5a}, 4096)
	raid1Write(t, a, 0, pattern)
	p, err := a.Grow(0)
	if err != nil {
		t.Fatal(err)
	}
	want := (40<<20 - a.dataOffset) >> 9 &^ 7
	if p.NewMemberSectors != want || p.NewArraySectors != want || p.OldArraySectors != old {
		t.Fatalf("plan %+v; want member and array sectors %d", p, want)
	}
	if got := a.Params().Basic.DevSectors; got != want {
		t.Fatalf("Params: %d sectors, want %d", got, want)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.Engine.Geo.ArraySectors(); got != want {
		t.Fatalf("reassembled at %d sectors, grown to %d", got, want)
	}
	for r, sb := range a.SBs {
		if sb.DataSectors != want {
			t.Errorf("role %d records %d data sectors, want %d", r, sb.DataSectors, want)
		}
	}
	info := a.BitmapInfo
	if info == nil || info.AllDirty {
		t.Fatalf("the grown bitmap was not trusted: %+v", info)
	}
	g := a.Bitmap.Geometry()
	if g.ArraySectors != want || g.Regions <= regions {
		t.Fatalf("bitmap covers %d sectors in %d regions; want %d sectors, more than %d regions", g.ArraySectors, g.Regions, want, regions)
	}
	for r := regions; r < g.Regions; r++ {
		if a.Bitmap.Written(r) || a.Bitmap.NeedsSync(r) {
			t.Fatalf("region %d of the added space is written or needs sync: the new space would be synced", r)
		}
	}
	if a.needsResync() {
		t.Fatal("the grown array needs a resync")
	}
	b, err := a.Members[1].ReadBlock(int64(a.dataOffset), 4096)
	if err != nil || !bytes.Equal(b, pattern) {
		t.Fatalf("data before the grow: %v", err)
	}
}

// Where the reserved area cannot hold the regions of the grown array at
// the old region size, the region size doubles (md doubles its bitmap
// chunk) and the merged regions keep the most cautious state.
func TestGrowDoublesRegion(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	rs := a.Bitmap.Geometry().RegionSectors
	a.Close() // not clean: every written region stays as it was
	growFiles(t, paths, 600<<20)
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Grow(0); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g := a.Bitmap.Geometry()
	if a.BitmapInfo.AllDirty || g.RegionSectors <= rs || g.ArraySectors != a.Engine.Geo.ArraySectors() {
		t.Fatalf("bitmap after grow: %+v (all dirty %v), region was %d sectors", g, a.BitmapInfo.AllDirty, rs)
	}
}

func TestBitmapGrownMerges(t *testing.T) {
	cfg := bitmap.Config{ArrayUUID: [16]byte{1}, ArraySectors: 4 * 128, RegionSectors: 128, BlockSize: 512,
		AreaOffset: 8192, AreaBytes: 1024, Events: 3}
	b, err := bitmap.Create(cfg, bitmap.InitNeverWritten, bitmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 1024 bytes hold the header and one 512-byte block: grown past its
	// regions, the region size doubles.
	nb, err := b.Grown(4 * 128 * 200)
	if err != nil {
		t.Fatal(err)
	}
	if g := nb.Geometry(); g.RegionSectors <= 128 || g.ArraySectors != 4*128*200 {
		t.Fatalf("grown geometry %+v", g)
	}
	if _, err := b.Grown(128); err == nil {
		t.Fatal("a bitmap shrank")
	}
}

// Every refusal is checked before anything is written: the members'
// bytes are unchanged.
func TestGrowRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  CreateSpec
		n     int
		grow  []int64 // new member sizes (0: unchanged)
		size  uint64  // Grow's argument, sectors
		want  string
		none  bool // ErrGrowNoChange
		clean bool
	}{
		{name: "raid0", spec: CreateSpec{Level: engine.Level0}, n: 2, grow: []int64{32 << 20, 32 << 20}, want: "raid0"},
		{name: "raid10 far", spec: CreateSpec{Level: engine.Level10, Layout: engine.LayoutF2}, n: 2, grow: []int64{32 << 20, 32 << 20}, want: "far"},
		{name: "one member small", spec: CreateSpec{Level: engine.Level1}, n: 2, grow: []int64{32 << 20, 0}, size: 30 << 11, want: "at most"},
		{name: "max with one member small", spec: CreateSpec{Level: engine.Level1}, n: 2, grow: []int64{32 << 20, 0}, none: true},
		{name: "shrink", spec: CreateSpec{Level: engine.Level1}, n: 2, grow: []int64{32 << 20, 32 << 20}, size: 4 << 11, want: "shrink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := memberFiles(t, tc.n, 16<<20)
			a, err := Open(paths, tc.spec, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.SetClean(true); err != nil {
				t.Fatal(err)
			}
			a.Close()
			for i, s := range tc.grow {
				if s != 0 {
					growFiles(t, paths[i:i+1], s)
				}
			}
			if a, err = Open(paths, CreateSpec{}, false); err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			// The assembly's own bitmap rewrite is done (SetClean waits
			// for its header) before the bytes are taken.
			if err := a.SetClean(true); err != nil {
				t.Fatal(err)
			}
			before := fileSums(t, paths)
			_, err = a.Grow(tc.size)
			switch {
			case tc.none:
				if !errors.Is(err, ErrGrowNoChange) {
					t.Fatalf("Grow: %v; want ErrGrowNoChange", err)
				}
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Grow: %v; want an error saying %q", err, tc.want)
			}
			if after := fileSums(t, paths); !slicesEqual(before, after) {
				t.Fatal("a refused grow changed a member")
			}
		})
	}
}

func slicesEqual(a, b [][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A crash after the grown bitmap is on the members but before the
// superblocks took the new size: the array assembles at its old size,
// with every region dirty (the bitmap does not match it), never larger
// and never with regions wrongly clean.
func TestGrowCrashBeforeSuperblocks(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	old := a.Engine.Geo.ArraySectors()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	growFiles(t, paths, 32<<20)
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	saved := writeSuperblock
	writeSuperblock = func(m *Member, b []byte) error { return errors.New("power cut") }
	_, err = a.Grow(0)
	writeSuperblock = saved
	if err == nil {
		t.Fatal("Grow succeeded with no superblock written")
	}
	if got := a.Engine.Geo.ArraySectors(); got != old {
		t.Fatalf("after a failed grow the array serves %d sectors, was %d", got, old)
	}
	a.Close()
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.Engine.Geo.ArraySectors(); got != old {
		t.Fatalf("assembled at %d sectors after the cut, want the old %d", got, old)
	}
	if !a.BitmapInfo.AllDirty {
		t.Fatalf("the bitmap of another size was trusted: %+v", a.BitmapInfo)
	}
}

// raid10 near grows like raid1: the array is md's raid10 size of the new
// data area, and the reassembly agrees.
func TestGrowRAID10Near(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	growFiles(t, paths, 48<<20)
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	p, err := a.Grow(32 << 11) // 32 MiB of each member
	if err != nil {
		t.Fatal(err)
	}
	g := a.Engine.Geo
	if p.NewMemberSectors != 32<<11 || p.NewArraySectors != g.ArraySectors() || g.ArraySectors() != 3*32<<11/2 {
		t.Fatalf("plan %+v, geometry %+v (%d sectors)", p, g, g.ArraySectors())
	}
	a.Close()
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.Engine.Geo.ArraySectors(); got != p.NewArraySectors || a.BitmapInfo.AllDirty {
		t.Fatalf("reassembled at %d sectors (all dirty %v), grown to %d", got, a.BitmapInfo.AllDirty, p.NewArraySectors)
	}
}

// snapshotFiles copies the member files (a power cut: what is on them now).
func snapshotFiles(t *testing.T, paths []string) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		q := filepath.Join(dir, fmt.Sprintf("cut%d", i))
		if err := os.WriteFile(q, b, 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, q)
	}
	return out
}

// A grow that doubles the bitmap's region size, cut after the grown data
// blocks but before the final header write: a data block does not say its
// region size, so an old header over them would read the old regions
// wrong (clean data as never written, so rebuilds and checks skip it).
// The grown header goes first, so the copy does not match the old size
// and is taken as all dirty.
func TestGrowCutBeforeBitmapHeader(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 128, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	old := a.Bitmap.Geometry()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	growFiles(t, paths, 600<<20)
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	hdr := int64(old.BlockOffset(0))
	var mu sync.Mutex
	var cut []string
	dataSinceHeader := 0
	saved := writeBitmapBlock
	defer func() { writeBitmapBlock = saved }()
	writeBitmapBlock = func(m *Member, data []byte, off int64) error {
		mu.Lock()
		if off != hdr {
			dataSinceHeader++
		} else {
			h, err := bitmap.DecodeHeader(data)
			if err == nil && h.RegionSectors != old.RegionSectors && dataSinceHeader > 0 && cut == nil {
				// The grown data blocks are down, the header that
				// follows them is not.
				cut = snapshotFiles(t, paths)
			}
			dataSinceHeader = 0
		}
		mu.Unlock()
		return saved(m, data, off)
	}
	p, err := a.Grow(0)
	writeBitmapBlock = saved
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if cut == nil {
		t.Fatal("no cut point: the grow wrote no data block before a header")
	}
	b, err := Open(cut, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Engine.Geo.MemberSectors; got != p.OldMemberSectors {
		t.Fatalf("after the cut the array has %d sectors per member, want the old %d", got, p.OldMemberSectors)
	}
	lost := 0
	for r := range b.Bitmap.Geometry().Regions {
		if !b.Bitmap.Written(r) || !b.Bitmap.NeedsSync(r) {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d regions (all written) read as never written or in sync after the cut; the copy should be all dirty", lost, b.Bitmap.Geometry().Regions)
	}
}

// A grow whose superblock update is cut after one member took it: the
// array assembles at the old size, and from then on every member records
// the old data area again, so neither assembles grown alone later.
func TestGrowTornSuperblocks(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	old := a.Engine.Geo.MemberSectors
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	growFiles(t, paths, 32<<20)
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var cut []string
	n := 0
	saved := writeSuperblock
	defer func() { writeSuperblock = saved }()
	writeSuperblock = func(m *Member, b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if n++; n == 2 {
			cut = snapshotFiles(t, paths) // one member holds the grown superblock
		}
		return saved(m, b)
	}
	if _, err := a.Grow(0); err != nil {
		t.Fatal(err)
	}
	writeSuperblock = saved
	a.Close()
	if cut == nil {
		t.Fatal("no cut point")
	}
	b, err := Open(cut, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Engine.Geo.MemberSectors; got != old {
		t.Fatalf("after the torn update: %d sectors per member, want the old %d", got, old)
	}
	if err := b.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if err := b.SetClean(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for i := range cut {
		c, err := Open(cut[i:i+1], CreateSpec{}, false)
		if err != nil {
			t.Fatalf("member %d alone: %v", i, err)
		}
		got := c.Engine.Geo.MemberSectors
		c.Close()
		if got != old {
			t.Errorf("member %d alone assembles with %d sectors per member, want the old %d", i, got, old)
		}
	}
}

// Members grown in place while the array runs (lvextend, a resized
// virtual disk): grow --size max sees their new size, as mdadm re-reads
// it, rather than answering that the array already has it.
func TestGrowMembersGrownInPlace(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	old := a.Engine.Geo.MemberSectors
	growFiles(t, paths, 64<<20)
	p, err := a.GrowCheck(0, false)
	if err != nil {
		t.Fatalf("grow to max after the members grew in place: %v", err)
	}
	if p.NewMemberSectors <= old || p.NewMemberSectors<<9 > 64<<20 {
		t.Fatalf("grow to max: %d sectors per member (was %d, the members are now %d)", p.NewMemberSectors, old, 64<<20>>9)
	}
	if _, err := a.GrowCheck(40<<11, false); err != nil {
		t.Fatalf("grow to 40 MiB per member: %v", err)
	}
}
