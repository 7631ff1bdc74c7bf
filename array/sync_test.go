package array

import (
	"bytes"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// dataOf reads member path's data area.
func dataOf(t *testing.T, a *Array, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b[a.dataOffset : a.dataOffset+a.Engine.Geo.MemberSectors<<9]
}

// scribble writes pattern bytes into path's data area at off.
func scribble(t *testing.T, a *Array, path string, off int64, n int, pattern byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{pattern}, n), int64(a.dataOffset)+off); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRepairReAddReplace(t *testing.T) {
	paths := memberFiles(t, 3, 32<<20)
	a, err := Open(paths[:2], CreateSpec{Name: "s", Level: engine.Level1, AssumeClean: true, RegionSectors: 1 << 11}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Bitmap == nil {
		t.Fatal("raid1 created without a bitmap")
	}
	scribble(t, a, paths[0], 0, 4<<20, 0xaa)
	scribble(t, a, paths[1], 0, 4<<20, 0xaa)
	scribble(t, a, paths[1], 1<<20, 3*4096, 0x55) // 3 blocks differ

	check := func(repair bool) SyncStatus {
		t.Helper()
		if err := a.Check(repair); err != nil {
			t.Fatal(err)
		}
		a.WaitSync()
		s := a.SyncStatus()
		if s.LastResult != "ok" {
			t.Fatalf("check: %+v", s)
		}
		return s
	}
	// Three 4 KiB blocks: md's mismatch_cnt counts sectors.
	if s := check(false); s.MismatchCnt != 3*8 {
		t.Fatalf("check found %d mismatch sectors, want 24", s.MismatchCnt)
	}
	if s := check(true); s.MismatchCnt != 3*8 {
		t.Fatalf("repair found %d mismatch sectors, want 24", s.MismatchCnt)
	}
	if s := check(false); s.MismatchCnt != 0 {
		t.Fatalf("check after repair: %d mismatches", s.MismatchCnt)
	}

	// Fail, remove, re-add: the member is rebuilt and active again.
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.ReAdd(paths[0]); err == nil {
		t.Fatal("re-add of an active member accepted")
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	// A write while member 1 is away (regions of 1 MiB): it dirties
	// region 0, which stays dirty because a member is missing.
	first, last := a.Bitmap.Regions(0, 2048)
	if !a.Bitmap.StartWrite(first, last, 0) {
		a.fl.do(func() {}) // the flusher commits the set request after it
		a.fl.do(func() {})
	}
	scribble(t, a, paths[0], 0, 1<<20, 0x22)
	a.Bitmap.EndWrite(first, last)
	// An untracked difference in a clean region: re-add does not copy it.
	scribble(t, a, paths[1], 2<<20, 4096, 0x33)
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if s := a.SyncStatus(); s.LastAction != "rebuild" || s.LastResult != "ok" {
		t.Fatalf("after re-add: %+v", s)
	}
	if st := a.Status(); st.ActiveDisks != 2 {
		t.Fatalf("after rebuild: %+v", st)
	}
	d0, d1 := dataOf(t, a, paths[0]), dataOf(t, a, paths[1])
	if !bytes.Equal(d0[:1<<20], d1[:1<<20]) {
		t.Fatal("the region written while the member was away was not recovered")
	}
	if d1[2<<20] != 0x33 {
		t.Fatal("re-add copied a clean region")
	}

	// Replace role 0 with a new device.
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(0, paths[2]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if st := a.Status(); st.ActiveDisks != 2 || st.Members[0].Path != paths[2] {
		t.Fatalf("after replace: %+v", st)
	}
	if !bytes.Equal(dataOf(t, a, paths[2]), dataOf(t, a, paths[1])) {
		t.Fatal("copies differ after replace")
	}
	a.StopSync()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()

	b, err := Open([]string{paths[2], paths[1]}, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if st := b.Status(); st.ActiveDisks != 2 || b.BitmapInfo == nil || b.BitmapInfo.AllDirty {
		t.Fatalf("reassembled: %+v bitmap %+v", st, b.BitmapInfo)
	}
}

// A bitmap that cannot be trusted (corrupt header on every member) makes
// assembly take every region dirty, say so, and resync everything.
func TestCorruptBitmapAssemblesAllDirty(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	off := a.SBs[0].BitmapOffset
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, int64(off)+64); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.BitmapInfo == nil || !b.BitmapInfo.AllDirty || b.BitmapInfo.Err == nil {
		t.Fatalf("corrupt bitmap assembled as %+v", b.BitmapInfo)
	}
	if !b.needsResync() {
		t.Fatal("an untrusted bitmap needs no resync")
	}
	// The region size came from the lost header: the fallback uses the
	// default one.
	for r := range b.Bitmap.Geometry().Regions {
		if !b.Bitmap.NeedsSync(r) {
			t.Fatalf("region %d does not need sync", r)
		}
	}
	b.StartBackground()
	b.WaitSync()
	if s := b.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
		t.Fatalf("after resync: %+v", s)
	}
}

func TestBitmapRegionTooSmall(t *testing.T) {
	// 64 KiB regions of a huge array need more bitmap than an area can hold.
	if _, _, err := bitmapArea(1<<40, 128, 4096); err == nil {
		t.Fatal("a 64 KiB region for a 512 TiB array was accepted")
	}
}

// check skips regions never written: an array made without an initial
// sync holds whatever its devices held there, and that is no mismatch.
// Once written, a region is compared.
func TestCheckSkipsNeverWritten(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 1 << 11}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	scribble(t, a, paths[1], 0, 1<<20, 0x55) // old contents of one device
	check := func() uint64 {
		t.Helper()
		if err := a.Check(false); err != nil {
			t.Fatal(err)
		}
		a.WaitSync()
		s := a.SyncStatus()
		if s.LastResult != "ok" {
			t.Fatalf("check: %+v", s)
		}
		return s.MismatchCnt
	}
	if n := check(); n != 0 {
		t.Fatalf("check counted %d mismatches in never-written regions", n)
	}
	first, last := a.Bitmap.Regions(0, 2048)
	writeRegions(a, first, last)
	// The first write to a never-written region makes a resync copy the
	// rest of it (md syncs a new array instead): then check finds the
	// copies equal, and later differences count.
	a.WaitSync()
	if !a.Bitmap.Written(first) || a.Bitmap.NeedsSync(first) {
		t.Fatalf("region %d after its first write and the resync: written %v, needs sync %v", first, a.Bitmap.Written(first), a.Bitmap.NeedsSync(first))
	}
	if n := check(); n != 0 {
		t.Fatalf("check after the first write's resync: %d mismatches, want 0", n)
	}
	scribble(t, a, paths[1], 0, 1<<20, 0x66)
	if n := check(); n != 1<<20/512 {
		t.Fatalf("check of a written region that differs: %d mismatch sectors, want 2048 (1 MiB)", n)
	}
}

// scribbleBytes writes p into path's data area at off.
func scribbleBytes(t *testing.T, a *Array, path string, off int64, p []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, int64(a.dataOffset)+off); err != nil {
		t.Fatal(err)
	}
}
