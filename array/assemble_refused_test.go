package array

import (
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A blank spare given at assembly that the array cannot take (too small)
// refuses the assembly before anything is written: the raid5/6 log replay
// included (validate, then change).
func TestRefusedAssemblyWritesNothing(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	tw := tornRaid5Write(t, rng, true, 0)
	small := memberFiles(t, 1, 2<<20)[0]
	before := contents(t, tw.paths...)
	a, err := Open(tw.paths, CreateSpec{Level: -1, Spares: []string{small}}, false)
	if err == nil {
		a.Close()
		t.Fatal("assembled with a spare too small")
	}
	t.Logf("refused: %v", err)
	unchanged(t, "the refused assembly", tw.paths, before)
}

// An assembly told which array to expect (the daemon's state file) is
// refused before anything is written when the members hold another.
func TestAssemblyOfAnotherArrayWritesNothing(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	tw := tornRaid5Write(t, rng, true, 0)
	before := contents(t, tw.paths...)
	a, err := Open(tw.paths, CreateSpec{Level: -1, UUID: "00000000-0000-4000-8000-000000000000"}, false)
	if err == nil {
		a.Close()
		t.Fatal("assembled members of another array than the one expected")
	}
	t.Logf("refused: %v", err)
	unchanged(t, "the refused assembly", tw.paths, before)
}

// Blank spares that would overflow the role table refuse the assembly
// before the raid5/6 log replay writes anything.
func TestAssemblyOverfullRoleTableWritesNothing(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	tw := tornRaid5Write(t, rng, true, 0)
	spares := memberFiles(t, engine.RoleTableSize-len(tw.paths)+1, 16<<20)
	before := contents(t, tw.paths...)
	a, err := Open(tw.paths, CreateSpec{Level: -1, Spares: spares}, false)
	if err == nil {
		a.Close()
		t.Fatal("assembled with more members and spares than the role table holds")
	}
	t.Logf("refused: %v", err)
	unchanged(t, "the refused assembly", tw.paths, before)
	unchanged(t, "the refused assembly", spares, contents(t, spares...))
}

// A raid0 takes no spare: a blank one given at its assembly refuses it
// before anything is written.
func TestRaid0AssemblyWithSpareWritesNothing(t *testing.T) {
	paths := memberFiles(t, 2, 8<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level0, ChunkSectors: 16}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	a.Close()
	spare := memberFiles(t, 1, 8<<20)
	before := contents(t, paths...)
	a, err = Open(paths, CreateSpec{Level: -1, Spares: spare}, false)
	if err == nil {
		a.Close()
		t.Fatal("assembled a raid0 with a spare")
	}
	t.Logf("refused: %v", err)
	unchanged(t, "the refused assembly", paths, before)
}
