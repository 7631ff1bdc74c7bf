package array

import (
	"errors"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/probe/probetest"
)

// A spare let go keeps this array's spare superblock at 4 KiB, which
// what a user puts on the device next may leave in place (an MBR
// partition table is one sector, 0): taken back as a spare or a new
// member, the device is checked for signatures like any other, not taken
// for blank because of the old superblock.
func TestLetGoSpareWithDataNeedsForce(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.WaitSync()
	if err := a.RemoveSpare(paths[2]); err != nil {
		t.Fatal(err)
	}
	probetest.Write(t, paths[2], "mbr")
	before := contents(t, paths[2])
	if err := a.AddSpares(paths[2:], false); !errors.Is(err, ErrSignature) {
		t.Fatalf("adding back a let-go spare that now holds a partition table: %v", err)
	}
	if err := a.ReplaceMember(0, paths[2], false); !errors.Is(err, ErrSignature) {
		t.Fatalf("replacing with a let-go spare that now holds a partition table: %v", err)
	}
	unchanged(t, "refused add", paths[2:], before)
	if err := a.AddSpares(paths[2:], true); err != nil {
		t.Fatalf("forced: %v", err)
	}
	if len(a.Spares()) != 1 {
		t.Fatalf("spares %v", a.Spares())
	}
	onlyOurs(t, paths[2])
}
