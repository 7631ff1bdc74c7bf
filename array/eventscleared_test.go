package array

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Tests of md's events_cleared rule for re-add (the bitmap header's
// events cleared, format version 2).

// TestReAddOldCopyFromEarlierRunRebuildsAll: md's events_cleared rule
// across runs. B leaves in run 1 and an image of it as it left is kept;
// the array runs on (a write B misses), B is re-added and rebuilt, the
// idle regions go clean, and the array is stopped. Run 2 starts without B
// (the kept image is put back in its place: stale, left out); re-adding
// it must copy every written region: the write it missed is in a region
// cleared since, which the bitmap no longer says dirty. The bitmap's
// events_cleared (the generation of the last clear, in its header) is
// newer than the image's events, which says so.
func TestReAddOldCopyFromEarlierRunRebuildsAll(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	spec := CreateSpec{Name: "t", Level: engine.Level1, AssumeClean: true, RegionSectors: testRegion}
	a := newRAID1(t, paths)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	userWrite(t, a, paths, 1<<20, 4096, 0x11)
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	image := fileBytes(t, paths[1])[0]        // B as it left
	userWrite(t, a, paths, 5<<20, 4096, 0x5b) // B misses it
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if st := a.Status(); st.ActiveDisks != 2 {
		t.Fatalf("after the first re-add: %+v", st)
	}
	if d0, d1 := dataOf(t, a, paths[0]), dataOf(t, a, paths[1]); !bytes.Equal(d0, d1) {
		t.Fatalf("first re-add: byte at 5 MiB is %#x, want %#x", d1[5<<20], d0[5<<20])
	}
	stop(t, a) // the clean stop clears every idle region
	if r, _ := a.Bitmap.Regions(5<<20>>9, 8); a.Bitmap.State(r) != bitmap.Clean {
		t.Fatalf("region %d is %s after the clean stop", r, a.Bitmap.State(r))
	}

	if err := os.WriteFile(paths[1], image, 0o600); err != nil {
		t.Fatal(err)
	}
	a = run(t, paths, spec)
	defer a.Close()
	if st := a.Engine.State().Members[1].State; st != engine.MemberMissing && st != engine.MemberFaulty {
		t.Fatalf("run 2: the old image of B is %s, want left out", st)
	}
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if s := a.SyncStatus(); s.LastResult != "ok" || a.Status().ActiveDisks != 2 {
		t.Fatalf("after re-add: %+v, %+v", s, a.Status())
	}
	if d0, d1 := dataOf(t, a, paths[0]), dataOf(t, a, paths[1]); !bytes.Equal(d0, d1) {
		t.Fatalf("re-added old copy of B differs: byte at 5 MiB is %#x, want %#x (a bitmap-only re-add of a copy older than the last clear)", d1[5<<20], d0[5<<20])
	}
}

// bitmapHeaderOf decodes member path's copy of the bitmap header.
func bitmapHeaderOf(t *testing.T, path string) bitmap.Header {
	t.Helper()
	sb := superblockOf(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bitmap.Examine(b[sb.BitmapOffset:sb.BitmapOffset+sb.BitmapBytes], sb.BitmapOffset)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s.Header
}

// TestAssembleV1BitmapTakenAsClearedAtItsEvents: a bitmap a build of
// format version 1 wrote (no events cleared) is used, not thrown away,
// taken as cleared at its header's events (every member older than that
// is re-added in full), and rewritten in version 2 from the start.
func TestAssembleV1BitmapTakenAsClearedAtItsEvents(t *testing.T) {
	paths := newStoppedArray(t, 2, 16<<20)
	var events uint64
	for _, p := range paths {
		sb := superblockOf(t, p)
		craftBitmapHeader(t, p, int64(sb.BitmapOffset), 4096, func(b []byte) {
			binary.LittleEndian.PutUint32(b[8:], bitmap.VersionV1)
			clear(b[84:92])
			events = binary.LittleEndian.Uint64(b[48:])
		})
		if h := bitmapHeaderOf(t, p); h.Version != bitmap.VersionV1 || h.EventsCleared != events {
			t.Fatalf("crafted header %+v", h)
		}
	}
	a, err := Open(paths, CreateSpec{Name: "od", Level: engine.Level1, ChunkSectors: 128}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.BitmapInfo.AllDirty || a.BitmapInfo.EventsCleared != events || a.Bitmap.EventsCleared() != events {
		t.Fatalf("a version 1 bitmap: all dirty %v (%v), events cleared %d, want %d", a.BitmapInfo.AllDirty, a.BitmapInfo.Err, a.Bitmap.EventsCleared(), events)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if h := bitmapHeaderOf(t, p); h.Version != bitmap.Version || h.EventsCleared != events || h.Events <= events {
			t.Fatalf("%s after the start: header %+v, want version %d, events cleared %d", p, h, bitmap.Version, events)
		}
	}
}

// TestReAddAfterClearsOfItsGenerationCopiesOnlyDirty: clears made while
// the member was still in the array, in the generation of its superblock
// (events cleared not newer than its events), do not make its re-add a
// full copy: only the regions written while it was away are copied.
func TestReAddAfterClearsOfItsGenerationCopiesOnlyDirty(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	defer a.Close()
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	userWrite(t, a, paths, 1<<20, 4096, 0x11)
	// The written region is cleared in the current generation, the one
	// of the superblocks member 1 has.
	a.fl.do(a.fl.clearIdle)
	if r, _ := a.Bitmap.Regions(1<<20>>9, 8); a.Bitmap.State(r) != bitmap.Clean || a.Bitmap.EventsCleared() != superblockOf(t, paths[1]).Events {
		t.Fatalf("region %d is %s, events cleared %d, member 1's events %d", r, a.Bitmap.State(r), a.Bitmap.EventsCleared(), superblockOf(t, paths[1]).Events)
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	if sb, cleared := superblockOf(t, paths[1]), a.Bitmap.EventsCleared(); sb.Events < cleared {
		t.Fatalf("member 1 left with events %d, before the clears (events cleared %d)", sb.Events, cleared)
	}
	userWrite(t, a, paths, 5<<20, 4096, 0x5b) // member 1 misses it
	// An untracked difference in the clean region: a full copy would
	// overwrite it, a bitmap re-add leaves it.
	scribble(t, a, paths[1], 1<<20+4096, 4096, 0x33)
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if s := a.SyncStatus(); s.LastResult != "ok" || a.Status().ActiveDisks != 2 {
		t.Fatalf("after re-add: %+v, %+v", s, a.Status())
	}
	d1 := dataOf(t, a, paths[1])
	if d1[5<<20] != 0x5b {
		t.Fatalf("the write member 1 missed was not copied: %#x", d1[5<<20])
	}
	if d1[1<<20+4096] != 0x33 {
		t.Fatal("re-add copied a region cleared before the member left: a full copy where the bitmap sufficed")
	}
}
