package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A raid1 grown without a bitmap resyncs the added space from the old end
// (md resyncs a grown raid1 from its old size): the members held
// different bytes there, and nothing says it was never written.
func TestGrowNoBitmapResyncsAddedSpace(t *testing.T) {
	for _, tc := range []struct {
		level   engine.Level
		members int
	}{{engine.Level1, 2}, {engine.Level10, 4}} {
		t.Run(tc.level.String(), func(t *testing.T) { growNoBitmap(t, tc.level, tc.members) })
	}
}

func growNoBitmap(t *testing.T, level engine.Level, members int) {
	paths := memberFiles(t, members, 16<<20)
	spec := CreateSpec{Level: level, NoBitmap: true}
	if level == engine.Level10 {
		spec.Layout = engine.LayoutN2
	}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	a.StartBackground()
	a.WaitSync()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	old := a.Engine.Geo.ArraySectors()
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
	t.Logf("needsResync after grow: %v", a.needsResync())
	a.StartBackground()
	a.WaitSync()
	s := runCheck(t, a)
	if s.MismatchCnt != 0 {
		t.Fatalf("check after a %s grow without a bitmap counted %d mismatches: the added space was never synced", level, s.MismatchCnt)
	}
}
