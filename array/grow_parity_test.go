package array

import (
	"math/rand"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// growGarbage grows the member files to size, the added space full of
// garbage (as a larger disk's leftovers).
func growGarbage(t *testing.T, rng *rand.Rand, paths []string, size int64) {
	t.Helper()
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, size-st.Size())
		rng.Read(b)
		if _, err := f.WriteAt(b, st.Size()); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// A raid5 and a raid6 array grow into larger members (like mdadm --grow
// --size=max): each member's data area is a whole number of chunks, the
// array gains whole stripes, the old data stays, and the added stripes,
// whose parity is the members' leftovers, are never updated by
// read-modify-write before something made their parity right: with the
// bitmap they are never written (reconstruct-writes, then resynced by
// region), without it a resync from the old end is pending (recorded in
// the superblocks: the grown array is not clean) and the stripes past its
// position are unsynced. Half-chunk writes over the added space, which
// would otherwise be read-modify-writes carrying the garbage on, leave
// every stripe's parity that of its data; the resync then ends, and the
// next assembly is the grown array.
func TestGrowParity(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6} {
		for _, nobm := range []bool{false, true} {
			name := level.String() + "/bitmap"
			if nobm {
				name = level.String() + "/no-bitmap"
			}
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(level) + 40))
				paths := garbageFiles(t, rng, 5)
				spec := CreateSpec{Level: level, ParityLayout: engine.LeftSymmetric, ChunkSectors: 16, RegionSectors: 128,
					NoBitmap: nobm, SyncMinBytes: 1 << 30}
				a, err := Open(paths, spec, true)
				if err != nil {
					t.Fatal(err)
				}
				if err := a.SetClean(false); err != nil {
					t.Fatal(err)
				}
				a.StartBackground() // without a bitmap, the initial build
				r := &pRing{done: map[uint16]error{}}
				h := a.newQueue(r)
				var id uint64
				const span = 2048
				ref := make([]byte, span<<9)
				pWriteSpan(t, rng, h, r, ref, span, 64, &id)
				a.WaitSync()
				if err := a.SetClean(true); err != nil {
					t.Fatal(err)
				}
				g := *a.Engine.Parity
				a.Close()

				growGarbage(t, rng, paths, 20<<20+3<<10) // (not a whole chunk more)
				if a, err = Open(paths, CreateSpec{Level: -1}, false); err != nil {
					t.Fatal(err)
				}
				defer func() { a.Close() }()
				if got := a.Engine.ArraySectors(); got != g.ArraySectors() {
					t.Fatalf("larger members grew the array at assembly: %d sectors, was %d", got, g.ArraySectors())
				}
				if a.SyncStatus().ResyncNeeded {
					t.Fatal("a clean array needs a resync before the grow")
				}
				p, err := a.Grow(0)
				if err != nil {
					t.Fatal(err)
				}
				ng := *a.Engine.Parity
				if p.NewMemberSectors%g.ChunkSectors != 0 || p.NewMemberSectors <= g.MemberSectors ||
					ng.MemberSectors != p.NewMemberSectors || p.NewArraySectors != ng.ArraySectors() ||
					p.OldArraySectors != g.ArraySectors() || a.Engine.ArraySectors() != p.NewArraySectors {
					t.Fatalf("grow: %+v, geometry now %+v", p, ng)
				}
				if got := a.SyncStatus().ResyncNeeded; got != nobm {
					t.Fatalf("after the grow a resync is needed: %v (bitmap: %v)", got, !nobm)
				}
				for _, sb := range a.SBs {
					if sb.DataSectors != p.NewMemberSectors || (nobm && sb.Clean) {
						t.Fatalf("superblock after the grow: data %d sectors, clean %v", sb.DataSectors, sb.Clean)
					}
				}
				// Served before any resync: half-chunk writes over the
				// added stripes.
				if err := a.SetClean(false); err != nil {
					t.Fatal(err)
				}
				r = &pRing{done: map[uint16]error{}}
				h = a.newQueue(r)
				pReadAll(t, rng, h, r, ref, span)
				full := make([]byte, p.NewArraySectors<<9)
				copy(full, ref)
				old := p.OldArraySectors
				pWriteRange(t, rng, h, r, full, old, p.NewArraySectors, 8, &id)
				per := ng.ChunkSectors * uint64(ng.DataMembers())
				pConsistentFrom(t, a, old/per, p.NewArraySectors)
				a.StartBackground()
				a.WaitSync()
				if s := a.SyncStatus(); s.ResyncNeeded || (nobm && (s.LastAction != "resync" || s.LastResult != "ok")) {
					t.Fatalf("after the grown space's resync: %+v", s)
				}
				pConsistentFrom(t, a, old/per, p.NewArraySectors)
				if err := a.SetClean(true); err != nil {
					t.Fatal(err)
				}
				a.Close()
				if a, err = Open(paths, CreateSpec{Level: -1}, false); err != nil {
					t.Fatal(err)
				}
				if got := a.Engine.ArraySectors(); got != p.NewArraySectors {
					t.Fatalf("assembled after the grow: %d sectors, want %d", got, p.NewArraySectors)
				}
				r = &pRing{done: map[uint16]error{}}
				h = a.newQueue(r)
				pReadAllFrom(t, rng, h, r, full, old, p.NewArraySectors)
				pReadAll(t, rng, h, r, ref, span)
			})
		}
	}
}
