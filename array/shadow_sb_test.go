package array

import (
	"fmt"
	randv2 "math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// TestTornSuperblockUpdateEveryMember: a power cut tears the superblock
// update of every member at once (devices updated in 512-byte sectors; an
// update past the role table's eighth entry spans several). The shadow
// copy, written and flushed before each primary, holds the update: the
// array assembles in the updated state (the failed role stays failed,
// its stale copy is not trusted), as md's one-sector superblock would.
func TestTornSuperblockUpdateEveryMember(t *testing.T) {
	paths := memberFiles(t, 10, 16<<20)
	a, err := Open(paths, CreateSpec{Name: "t", Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 128, AssumeClean: true, RegionSectors: testRegion}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	old := fileBytes(t, paths...)
	if err := a.Fail(9); err != nil { // role 9's entry: the update's second sector
		t.Fatal(err)
	}
	a.Close()
	for i, p := range paths[:9] {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The tear: the first sector as it was, the rest written.
		if _, err := f.WriteAt(old[i][engine.SuperblockOffset:engine.SuperblockOffset+512], engine.SuperblockOffset); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if _, err := engine.ParseSuperblock(fileBytes(t, p)[0][engine.SuperblockOffset:]); err == nil {
			t.Fatalf("%s: the torn superblock parses", p)
		}
	}
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatalf("assembly after the torn update: %v", err)
	}
	defer b.Close()
	if st := b.Engine.State().Members[9].State; st == engine.MemberActive {
		t.Fatalf("role 9, failed before the cut, is %s", st)
	}
	for r := range 9 {
		if st := b.Engine.State().Members[r].State; st != engine.MemberActive {
			t.Fatalf("role %d is %s", r, st)
		}
	}
}

// TestTornSuperblockCutSweep: a power cut at each device write of a
// superblock update of a 10-member raid10 (every member's update spans
// several sectors; the cut drops a random part of every write not yet
// flushed, so it can tear any member's): the array always assembles,
// and no failure an update acknowledged, this one's or the one before, is
// lost.
func TestTornSuperblockCutSweep(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		for n := 1; ; n++ {
			if n > 200 {
				t.Fatal("the update never completed before the cut")
			}
			rack := memdev.NewRack(randv2.New(randv2.NewPCG(seed, uint64(n))))
			var paths []string
			for i := range 10 {
				p := fmt.Sprintf("/m%d", i)
				paths = append(paths, p)
				rack.AddDisk(p, 16<<20)
			}
			open := func(p string) (Device, error) { return rack.Open(p) }
			a, err := Open(paths, CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 16, RegionSectors: 128, AssumeClean: true, OpenDevice: open}, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.SetClean(false); err != nil {
				t.Fatal(err)
			}
			if err := a.Fail(9); err != nil { // acknowledged
				t.Fatal(err)
			}
			rack.CutAfter(n)
			ferr := a.Fail(7) // (role 7's copy, role 6, holds its chunks)
			completed := rack.Armed()
			rack.CutAfter(0)
			rack.PowerCut()
			closed := make(chan struct{})
			go func() { a.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
			}
			b, err := Open(paths, CreateSpec{Level: -1, OpenDevice: open}, false)
			if err != nil {
				t.Fatalf("seed %d cut %d: assembly: %v", seed, n, err)
			}
			st := b.Engine.State()
			b.Close()
			if st.Members[9].State == engine.MemberActive {
				t.Fatalf("seed %d cut %d: the failure of role 9, acknowledged before the update, was lost", seed, n)
			}
			if ferr == nil && completed && st.Members[7].State == engine.MemberActive {
				t.Fatalf("seed %d cut %d: the acknowledged failure of role 7 was lost", seed, n)
			}
			if completed {
				t.Logf("seed %d: %d cut points", seed, n-1)
				break
			}
		}
	}
}
