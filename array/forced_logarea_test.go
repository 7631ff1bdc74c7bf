package array

import (
	"bytes"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (a suspicion, proven here). A raid6 whose two halves ran
// alone (split brain: {0,1} and {2,3}), then assembled with --force: the
// fresher half is kept and the other half's members are put back, to be
// rebuilt in full. Their write-hole log areas hold that half's entries,
// numbered as this array's: they were read at the forced assembly (their
// checkpoint and entries taken as the kept side's), and stayed in the
// area, to be replayed by a later assembly over parity this side wrote.
// A forced member's area is now emptied, as a new device's, and not read.
func TestForcedMemberLogAreaEmptied(t *testing.T) {
	paths, sb, ent := splitRaid6(t)
	f, err := Open(paths, CreateSpec{Level: -1, Force: true}, false)
	if err != nil {
		t.Fatalf("forced assembly: %v", err)
	}
	defer f.Close()
	if f.Members[2] == nil || f.Engine.State().Members[2].State != engine.MemberRebuilding {
		t.Fatalf("member 2 after the forced assembly: %v", f.Engine.State().Members[2])
	}
	f.StopSync()
	got, err := f.Members[2].ReadBlock(int64(sb.LogOffset)+splitEntryOff, len(ent))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, ent) {
		t.Error("the forced member's log area still holds the other half's entry: a later assembly would replay it")
	}
	if f.logNext > 1<<30 {
		t.Errorf("the log numbers on from %d: the other half's entry was read as this side's", f.logNext)
	}
}

// splitRaid6 makes a four-member raid6 whose halves {0,1} and {2,3} ran
// alone (split brain), {0,1} the fresher, with an entry of {2,3}'s own
// left live in member 2's write-hole log area (at splitEntryOff past the
// area's start). It returns the paths, the array's superblock and the
// entry's bytes.
func splitRaid6(t *testing.T) ([]string, engine.Superblock, []byte) {
	t.Helper()
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level6, ChunkSectors: 16, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	sb := *a.SBs[0]
	g := *a.Engine.Parity
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// Half {2,3} alone; an entry of its own left live in member 2's area.
	y, err := Open(paths[2:], CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("half {2,3}: %v", err)
	}
	n := uint64(8)
	var ent []byte
	e := engine.ParityLogEntry{Array: sb.ArrayUUID, Seq: 1 << 30, Stripe: 1, RowLo: 0, RowHi: n, Logged: 1, Written: 2, Parity: 2,
		P: bytes.Repeat([]byte{0xee}, int(n)<<9), Q: bytes.Repeat([]byte{0xdd}, int(n)<<9)}
	ent = make([]byte, engine.ParityLogEntrySize(n, 2))
	if _, err := e.Encode(ent, g); err != nil {
		t.Fatal(err)
	}
	if err := y.Members[2].WriteBlockSync(int64(sb.LogOffset)+splitEntryOff, ent); err != nil {
		t.Fatal(err)
	}
	if err := y.SetClean(true); err != nil {
		t.Fatal(err)
	}
	y.Close()
	// Half {0,1} alone, fresher (more updates).
	x, err := Open(paths[:2], CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("half {0,1}: %v", err)
	}
	for range 3 {
		if err := x.SetClean(false); err != nil {
			t.Fatal(err)
		}
		if err := x.SetClean(true); err != nil {
			t.Fatal(err)
		}
	}
	x.Close()
	return paths, sb, ent
}

// splitEntryOff is where splitRaid6 puts its entry in member 2's area.
const splitEntryOff = 4 * 4096
