package array

import (
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. add --level 1 --force over devices that are only spares of array X
// (no data, X's members elsewhere). Over one such spare and a blank
// device, a new array is created (the superblocks make no one array:
// mdadm --create --run). Over two spares of X, the same request is taken
// for an assembly of X from its spares and refused with "array ""
// cannot be assembled: 0 of 2 members active": the user asked for a
// create, the message speaks of an assembly, does not say the devices
// are spares of X, and gives no way on (wipe them first). With --force,
// md's create does not refuse spares.
func TestReviewSpsbCreateForceOverSparesOnly(t *testing.T) {
	paths := memberFiles(t, 6, 16<<20)
	x, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, Spares: paths[2:4]}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.SetClean(true); err != nil {
		t.Fatal(err)
	}
	x.Close()
	mixed, err := Open([]string{paths[2], paths[4]}, CreateSpec{Level: engine.Level1, Force: true}, true)
	if err != nil {
		t.Fatalf("create --force over a spare of X and a blank device: %v", err)
	}
	mixed.Close()
	// (paths[2] now holds the new array: X's other spare, paths[3], and a
	// second copy of the case: X's spare paths[3] with paths[5] made a
	// spare of X too.)
	x, err = Open(paths[:2], CreateSpec{Spares: paths[5:]}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.SetClean(true); err != nil {
		t.Fatal(err)
	}
	x.Close()
	b, err := Open([]string{paths[3], paths[5]}, CreateSpec{Level: engine.Level1, Force: true}, true)
	if err == nil {
		b.Close()
		return
	}
	if !strings.Contains(err.Error(), "spare") {
		t.Fatalf("create --force over two spares of one array (a spare and a blank device: created): %v", err)
	}
}
