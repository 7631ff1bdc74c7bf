package array

import (
	"fmt"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. An assembly given, with --force, a spare of another array the caller
// keeps (the daemon's pending or served array Y: Taken refuses it "not
// even with force", as add-spare does) must be refused before anything
// is written (validate, then change), as a blank spare failing
// checkBlankSpare is. The Taken check runs only in addSpares, after the
// array is assembled and started: the add succeeds without the spare
// asked for, with a warning.
func TestReviewSpsbForcedForeignTakenSpareCheckedAfterAssembly(t *testing.T) {
	paths := memberFiles(t, 5, 16<<20)
	x, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.SetClean(true); err != nil {
		t.Fatal(err)
	}
	x.Close()
	y, err := Open(paths[2:4], CreateSpec{Level: engine.Level1, AssumeClean: true, Spares: paths[4:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	yUUID := y.Status().UUID
	if err := y.SetClean(true); err != nil {
		t.Fatal(err)
	}
	y.Close()
	before := contents(t, paths[0], paths[1], paths[4])
	taken := func(uuid string, member *[16]byte) error {
		if uuid == yUUID {
			return fmt.Errorf("array %s is the state file's /dev/ublkb1, which did not start", uuid)
		}
		return nil
	}
	a, err := Open(paths[:2], CreateSpec{Force: true, Spares: paths[4:], Taken: taken}, false)
	if err != nil {
		t.Logf("refused: %v", err)
		unchanged(t, "refused assembly", []string{paths[0], paths[1], paths[4]}, before)
		return
	}
	defer a.Close()
	t.Fatalf("assembly with --force and spare %s of kept array %s: accepted (the daemon then starts it), the spare checked only once the array was open and left out with a warning: spares %v, warnings %q",
		paths[4], yUUID, a.Spares(), a.Warnings)
}
