package array

import (
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A rebuilding role's recovery offset is bounded by the data size of the
// superblock it came from, which may exceed the array's member size (the
// smallest of the members'). Past that the role would read as rebuilt
// beyond the array's end and no superblock could be written any more: it
// is rebuilt from the start instead.
func TestRecoveryOffsetPastArrayMemberSizeRebuildsFromStart(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	if err := os.Truncate(paths[0], 32<<20); err != nil {
		t.Fatal(err)
	}
	a, err := Open(paths, CreateSpec{Name: "t", Level: engine.Level1, AssumeClean: true, RegionSectors: testRegion}, true)
	if err != nil {
		t.Fatal(err)
	}
	stop(t, a)
	sb := superblockOf(t, paths[0])
	small := sb.DataSectors
	sb.Events++
	sb.DataSectors = (32<<20 - sb.DataOffset) / 512 &^ 7
	sb.Roles[1].State = engine.RoleRebuilding
	sb.Roles[1].RecoveryOffset = sb.DataSectors
	putSuperblock(t, paths[0], sb)

	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st := b.Engine.State().Members[1]
	t.Logf("member sectors %d (small %d), role 1 %v at %d", b.Engine.MemberSectors(), small, st.State, st.RebuildOffset)
	if err := b.SetClean(false); err != nil {
		t.Fatalf("assembled, but no superblock can be written: %v", err)
	}
	b.StartBackground()
	b.WaitSync()
	if s := b.Engine.State().Members[1]; s.State != engine.MemberActive {
		t.Fatalf("role 1 is %v at %d after the resumed rebuild: %+v", s.State, s.RebuildOffset, b.SyncStatus())
	}
}
