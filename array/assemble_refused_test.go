package array

import (
	"math/rand"
	"testing"
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
