package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// The last region at the old size is partial; grow extends it into the
// new space, which holds different bytes on each member: the region is
// synced again, as after a first write (found by review: check counted
// 256 mismatches in a clean region).
func TestGrowSyncsPartialLastRegion(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 1 << 13}, true)
	if err != nil {
		t.Fatal(err)
	}
	rs := a.Bitmap.Geometry().RegionSectors
	old := a.Engine.Geo.ArraySectors()
	t.Logf("array %d sectors, region %d, tail %d, regions %d", old, rs, old%rs, a.Bitmap.Geometry().Regions)
	a.StartBackground()
	last := int((old - 1) / rs)
	writeRegions(a, last, last)
	a.WaitSync()
	if a.Bitmap.NeedsSync(last) {
		t.Fatal("fill not done")
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	dataOff := a.dataOffset
	a.Close()
	growFiles(t, paths, 40<<20)
	for i, p := range paths {
		b := fill(int(40<<20-dataOff-old<<9), byte(0x10*i+3))
		scribbleBytes(t, &Array{dataOffset: dataOff}, p, int64(old<<9), b)
	}
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Grow(0); err != nil {
		t.Fatal(err)
	}
	t.Logf("after grow: region %d written %v needs sync %v state %v", last, a.Bitmap.Written(last), a.Bitmap.NeedsSync(last), a.Bitmap.State(last))
	a.StartBackground()
	a.WaitSync()
	s := runCheck(t, a)
	t.Logf("check: %+v", s)
	if s.MismatchCnt != 0 {
		t.Fatalf("check after grow counted %d mismatches in a clean region", s.MismatchCnt)
	}
}

// A grow that doubles the region size merges a written, clean region
// with never-written ones: the merged region is synced (it was left clean
// with its never-written part differing: 768 mismatches).
func TestGrowDoublingSyncsMergedRegions(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	rs := a.Bitmap.Geometry().RegionSectors
	a.StartBackground()
	writeRegions(a, 0, 0)
	a.WaitSync()
	for i, p := range paths { // old contents of the never-written regions 1..
		scribbleBytes(t, a, p, int64(rs<<9), fill(int(rs<<9)*3, byte(0x20*i+5)))
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	growFiles(t, paths, 64<<30)
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Grow(0); err != nil {
		t.Fatal(err)
	}
	t.Logf("region %d -> %d; region 0 state %v needs sync %v", rs, a.Bitmap.Geometry().RegionSectors, a.Bitmap.State(0), a.Bitmap.NeedsSync(0))
	a.StartBackground()
	a.WaitSync()
	s := runCheck(t, a)
	if s.MismatchCnt != 0 {
		t.Fatalf("check after grow counted %d mismatches (%+v)", s.MismatchCnt, s)
	}
}

// Regions smaller than a sync step (1 MiB): check compared whole steps,
// so never-written neighbours of a written region counted as mismatches;
// steps now end at region boundaries (resync.Job.Unit).
func TestCheckStepsWithinRegions(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rs := a.Bitmap.Geometry().RegionSectors
	a.StartBackground()
	for i, p := range paths { // old contents of the never-written regions 1..
		scribbleBytes(t, a, p, int64(rs<<9), fill(int(rs<<9)*3, byte(0x20*i+5)))
	}
	writeRegions(a, 0, 0)
	a.WaitSync()
	t.Logf("written: %v %v %v", a.Bitmap.Written(0), a.Bitmap.Written(1), a.Bitmap.Written(2))
	// the fill resync copied whole 1 MiB steps: scribble again after it
	for i, p := range paths {
		scribbleBytes(t, a, p, int64(rs<<9), fill(int(rs<<9)*3, byte(0x20*i+7)))
	}
	s := runCheck(t, a)
	if s.MismatchCnt != 0 {
		t.Fatalf("check counted %d mismatches in never-written regions 1..3 (%+v)", s.MismatchCnt, s)
	}
}

// A region first written while a check runs is not compared by the
// check: its sync (which waits for the check to end) makes it equal; it
// used to count the never-written rest as mismatches.
func TestCheckSkipsRegionsAwaitingSync(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: 1 << 11, SyncMaxBytes: 8 << 20}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.StartBackground()
	for i, p := range paths {
		scribbleBytes(t, a, p, 0, fill(int(a.Engine.Geo.ArraySectors()<<9), byte(0x10*i+1)))
	}
	// region 0 written and filled first, so the check has something to do
	writeRegions(a, 0, 0)
	a.WaitSync()
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	last := a.Bitmap.Geometry().Regions - 1
	writeRegions(a, last, last)
	a.WaitSync()
	s := a.SyncStatus()
	t.Logf("%+v", s)
	if s.MismatchCnt != 0 {
		t.Fatalf("check counted %d mismatches in a region first written during it", s.MismatchCnt)
	}
	// The resync that followed is the last job; the check's end is kept.
	if s.LastCheck != "check" || s.LastCheckResult != "ok" {
		t.Fatalf("the check's result was not kept: %+v", s)
	}
}

// writeRegions marks regions first..last written through the bitmap, as
// a write does (no data): the flusher commits the set request first.
func writeRegions(a *Array, first, last int) {
	if !a.Bitmap.StartWrite(first, last, 0) {
		a.fl.do(func() {})
		a.fl.do(func() {})
	}
	a.Bitmap.EndWrite(first, last)
}

// runCheck runs a check to its end and returns the sync status after it.
func runCheck(t *testing.T, a *Array) SyncStatus {
	t.Helper()
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	return a.SyncStatus()
}
