package array

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"
)

// forcedStart builds a raid5 of 3 whose member drop (0 or 2) dropped out
// by I/O errors (its superblock as it was), after which writes went on and a
// power cut took member 1 (its file, and so its data and superblock,
// stays as the cut left it), member 2 several generations behind; then
// starts it with add --force of members
// 0 and 2, which puts member 2 in sync as it is. It returns the paths,
// the forced array and the data the array holds at sector 0 (droppedSpan
// sectors).
func forcedStart(t *testing.T, drop int) ([]string, *Array, []byte) {
	rng := rand.New(rand.NewSource(7))
	paths, a, data, _ := droppedRaid5Member(t, rng, drop)
	neu := make([]byte, droppedSpan/2<<9)
	rng.Read(neu)
	pWriteOne(t, rng, a, 0, neu)
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	pWriteOne(t, rng, a, 0, neu)
	copy(data, neu)
	a.Close() // power cut; member 1 lost with it

	a, err := Open([]string{paths[0], paths[2]}, CreateSpec{Level: -1, Force: true}, false)
	if err != nil {
		t.Fatalf("forced: %v", err)
	}
	return paths, a, data
}

// failSuperblockOnce makes the next superblock write to path fail.
func failSuperblockOnce(t *testing.T, path string) {
	orig := writeSuperblock
	t.Cleanup(func() { writeSuperblock = orig })
	failed := false
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == path && !failed {
			failed = true
			return errors.New("injected: superblock write error")
		}
		return orig(m, b)
	}
}

// Found by review. The assembly set the in-memory superblock of a
// member put in sync as it is (promoted) to a copy of the freshest, events included, so superblock
// updates did not take it as behind: the first update (marking the
// array in use) wrote it together with the others instead of first.
// When that write failed (or a power cut took it), member 0 took a
// generation that records member 2 in sync while member 2 kept its own,
// three behind, and records member 1, which the forced start ran
// without, out of the array: member 2 was stale again, and so was
// member 1, found again, which before the forced start was current with
// member 0. The promoted member holds the last copy of its chunks: an
// update it fails must stop before any member takes it, leaving every
// superblock as the forced start found it (members 0 and 1 start the
// array without --force; members 0 and 2 need it again, as after a
// crash before the first update).
func TestForceUpPromotedFailsFirstUpdate(t *testing.T) {
	paths, a, data := forcedStart(t, 2)
	before := superblockOf(t, paths[0]).Events
	failSuperblockOnce(t, paths[2])
	if err := a.SetClean(false); err == nil {
		t.Fatal("first update: no error, though the promoted member failed its superblock write")
	}
	a.Close() // stopped (power cut)
	if e0, e2 := superblockOf(t, paths[0]).Events, superblockOf(t, paths[2]).Events; e0 != before {
		t.Errorf("member 0 took generation %d (was %d) that the promoted member 2 (at %d) did not", e0, before, e2)
	}
	x, err := Open([]string{paths[0], paths[1]}, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("members 0 and 1 (current before the forced start), unforced: %v", err)
	}
	rng := rand.New(rand.NewSource(8))
	if got := pReadOne(t, rng, x, 0, uint64(len(data)>>9)); !bytes.Equal(got, data) {
		t.Errorf("members 0 and 1: data differs from what was written")
	}
	x.Close()
}

// TestForceUpPromotedTakesTornFirstUpdate: the first update torn the
// other way (member 0 fails it, or the power cut comes after the
// promoted member took it) leaves member 2 a generation ahead of member
// 0, within the slack: the next assembly needs no --force. (It passed
// before the fix above too: it pins the README's "the next assembly
// needs no --force" for the order the fix keeps.)
func TestForceUpPromotedTakesTornFirstUpdate(t *testing.T) {
	paths, a, _ := forcedStart(t, 2)
	failSuperblockOnce(t, paths[0])
	t.Logf("first update: %v", a.SetClean(false))
	a.Close() // stopped (power cut)
	x, err := Open([]string{paths[0], paths[2]}, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("unforced: %v (events on disk: member 0 %d, member 2 %d)", err, superblockOf(t, paths[0]).Events, superblockOf(t, paths[2]).Events)
	}
	x.Close()
}

// Found by review (of the fix above). With the promoted member's
// in-memory superblock at its own generation (above), the superblock
// that management commands copy (refSB: a new spare's or member's, the
// one a re-add is compared with) was the first active role's, the
// promoted member's when it holds role 0: a generation long gone.
// It is the freshest active one.
func TestForceUpPromotedRefSuperblock(t *testing.T) {
	_, a, _ := forcedStart(t, 0)
	defer a.Close()
	if a.SBs[0].Events >= a.events {
		t.Fatalf("role 0 not behind (events %d, array %d): the test proves nothing", a.SBs[0].Events, a.events)
	}
	if ref := a.refSB(); ref.Events != a.events {
		t.Errorf("refSB: events %d, the array's %d", ref.Events, a.events)
	}
}
