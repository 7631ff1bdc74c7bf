package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. Two members holding array X, given with --level 1 (README: "with
// --level, members that hold an array of that level assemble it ... a
// create never hands back another array than the one asked for") and,
// by mistake, a spare of another array of the same name. The stray spare
// alone makes the devices "no one array", and with --force (which the
// refusal without it suggests) a new array is created over X's members:
// X's superblocks, bitmap and identity are gone. The members make one
// array: the foreign spare must be refused (or, forced, overwritten as a
// blank spare), never turn the assembly of X into a create over it.
func TestReviewSparesForeignSpareTurnsAssemblyIntoCreate(t *testing.T) {
	paths := memberFiles(t, 5, 16<<20)
	x, err := Open(paths[:2], CreateSpec{Name: "tank", Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	xUUID := x.Status().UUID
	if err := x.SetClean(true); err != nil {
		t.Fatal(err)
	}
	x.Close()
	y, err := Open(paths[2:4], CreateSpec{Name: "tank", Level: engine.Level1, AssumeClean: true, Spares: paths[4:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := y.SetClean(true); err != nil {
		t.Fatal(err)
	}
	y.Close()
	before := contents(t, paths[:2]...)

	// Without force: refused, nothing written.
	if _, err := Open(paths[:2], CreateSpec{Level: engine.Level1, Spares: paths[4:]}, true); err == nil {
		t.Fatal("assembly with another array's spare accepted without --force")
	} else {
		t.Logf("without --force: %v", err)
	}
	unchanged(t, "refused assembly", paths[:2], before)

	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, Force: true, Spares: paths[4:]}, true)
	if err != nil {
		t.Logf("forced: refused: %v", err)
		unchanged(t, "refused forced assembly", paths[:2], before)
		return
	}
	defer a.Close()
	if st := a.Status(); a.Created || st.UUID != xUUID {
		t.Fatalf("array %s's members with --level 1 --force and another array's spare: a new array %s was created over them (created %v)", xUUID, st.UUID, a.Created)
	}
}
