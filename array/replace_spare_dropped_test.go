package array

import (
	"errors"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. replace --with a spare whose superblock takes the
// device's check (its block written back) but whose next superblock write
// fails: the active member of the role was failed first, the failure's
// update dropped the spare (writeSpareSuperblocks), and replace then
// answered that the device was "no longer a spare", as if it had been
// refused before anything changed, while the role's in-sync member was
// failed. The spare now leaves the spares before the failure, and the
// answer says what happened: the device failed as it was put in the role
// (replace fails the member it replaces first: README, unlike md's hot
// replace).
func TestReplaceWithSpareDroppedByFailUpdate(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	orig := writeSuperblock
	t.Cleanup(func() { writeSuperblock = orig })
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == paths[2] {
			return errors.New("write: I/O error")
		}
		return orig(m, b)
	}
	err = a.ReplaceMember(1, paths[2], false)
	if err == nil {
		t.Fatal("replace onto a device that cannot take its superblock succeeded")
	}
	if st := a.Engine.State().Members[1].State; st == engine.MemberFaulty && strings.Contains(err.Error(), "no longer a spare") {
		t.Fatalf("replace answered %q, a refusal, with role 1 failed", err)
	}
	if !strings.Contains(err.Error(), "could not be written") {
		t.Fatalf("replace: %v, want the superblock write failure named", err)
	}
}
