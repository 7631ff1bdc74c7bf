package array

import (
	"errors"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A parity array whose members' data area is not a whole number of chunks
// (the create rounds each member to 4 KiB only): asking grow for the size
// it has, or for max when the members did not grow by a whole chunk,
// should answer "no change", not refuse it as a shrink.
func TestGrowParityPartChunkNoChange(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20+20<<10)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ChunkSectors: 128, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ms := a.Engine.MemberSectors()
	t.Logf("member sectors %d (%d over a whole chunk)", ms, ms%128)
	if ms%128 == 0 {
		t.Fatal("setup: the data area is whole chunks")
	}
	_, err1 := a.GrowCheck(ms, false)
	_, err2 := a.GrowCheck(0, false)
	for _, p := range paths { // 8 KiB more: still not a whole chunk more
		if err := os.Truncate(p, 16<<20+28<<10); err != nil {
			t.Fatal(err)
		}
	}
	_, err3 := a.GrowCheck(0, false)
	t.Logf("same size: %v\nmax: %v\nmax after +8 KiB: %v", err1, err2, err3)
	if !errors.Is(err1, ErrGrowNoChange) || !errors.Is(err2, ErrGrowNoChange) || !errors.Is(err3, ErrGrowNoChange) {
		t.Fatal("refused instead of no change")
	}
}
