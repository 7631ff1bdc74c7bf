package array

import (
	"bytes"
	"math/rand"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A member that missed a grow (its superblock write failed: it was failed
// and keeps its pre-grow superblock) put back by a forced assembly for a
// full rebuild takes the array's member size, not its own older, smaller
// one: the array keeps its grown size and the data written past the old
// end. It used to take its own record, and the smallest data size wins:
// the forced assembly shrank the array back below data it held. A member
// whose device cannot hold the array's data area is refused.
func TestForcedMemberMissedGrowKeepsSize(t *testing.T) {
	t.Run("grown device", func(t *testing.T) { forcedMemberMissedGrow(t, false) })
	t.Run("small device", func(t *testing.T) { forcedMemberMissedGrow(t, true) })
}

func forcedMemberMissedGrow(t *testing.T, small bool) {
	rng := rand.New(rand.NewSource(1))
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	old, err := os.ReadFile(paths[1])
	if err != nil {
		t.Fatal(err)
	}
	growFiles(t, paths, 32<<20)
	if a, err = Open(paths, CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Grow(0); err != nil {
		t.Fatal(err)
	}
	size := a.Engine.Geo.ArraySectors()
	// Data past the old end.
	const step = 128
	ref := make([]byte, step<<9)
	rng.Read(ref)
	s := size - step
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	buf := pageBuf(step << 9)
	copy(buf, ref)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: s, Sectors: step, Buf: buf})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// Member 1 as if its grow superblock write had failed: its pre-grow
	// superblock (and reserved area).
	f, err := os.OpenFile(paths[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(old[:1<<20], 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if small {
		// Its device no larger than before the grow: refused, nothing
		// written.
		if err := os.Truncate(paths[1], 16<<20); err != nil {
			t.Fatal(err)
		}
		before := fileSums(t, paths)
		if a, err := Open(paths, CreateSpec{Force: true}, false); err == nil {
			a.Close()
			t.Fatal("a forced member smaller than the array's data area was put back")
		} else {
			t.Log(err)
		}
		if !slicesEqual(before, fileSums(t, paths)) {
			t.Fatal("the refused assembly changed a member")
		}
		return
	}
	a, err = Open(paths, CreateSpec{Force: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.Engine.Geo.ArraySectors(); got != size {
		t.Fatalf("the forced assembly serves %d sectors; the array was grown to %d", got, size)
	}
	a.WaitSync()
	if !bytes.Equal(pReadOne(t, rng, a, s, step), ref) {
		t.Fatal("data past the old end reads back wrong")
	}
}
