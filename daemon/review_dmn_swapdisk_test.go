package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (dmn). The worst day of a mirror: a member fails (the
// survivors' superblocks record it faulty), the machine is powered down,
// the dead disk is swapped for a new, blank one in the same slot, and the
// machine boots. The new disk comes up under the failed member's name
// (/dev/sdX, /dev/disk/by-path/...), which the state file lists. md's
// assembly ignores a device without its superblock and starts the array
// degraded on the survivor (the package comment: "a failed disk pulled
// before `remove` ... the array starts degraded, as md's assembly does
// without a failed member"). The daemon instead refuses the whole array
// ("not a member of the array ...: no ublk-raid superblock") and keeps it
// pending for good: the array and its surviving copy are not served.
func TestReviewDmnFailedDiskSwappedForBlankStaysPending(t *testing.T) {
	paths := files(t, 2, 16<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	// Role 1 fails, recorded in role 0's superblock; a clean stop.
	failAndStop(t, a, 1)
	// The failed disk is replaced by a new blank one at the same path.
	if err := os.WriteFile(paths[1], make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	fakeDevices(t)
	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(paths)}}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := m.Restore()
	if err != nil {
		t.Fatal(err)
	}
	s := m.arrays[0]
	if s != nil {
		t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	}
	if started != 1 || s == nil {
		_, pending := m.pending[0]
		t.Fatalf("restart after the failed member %s was swapped for a blank disk: %d started, %d failed (pending %v); want the array started degraded on %s, as md's assembly starts it",
			paths[1], started, failed, pending, paths[0])
	}
	if st := s.a.Status(); st.Members[0].State != "active" || st.Members[1].Path != "" {
		t.Errorf("started with members %+v; want role 0 active on %s, role 1 without the blank disk", st.Members, paths[0])
	}
}
