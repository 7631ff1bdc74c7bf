package daemon

import (
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// reviewDmnEIODev is a dying disk: every read fails with EIO.
type reviewDmnEIODev struct{ array.Device }

func (reviewDmnEIODev) ReadAt(p []byte, off int64) error { return unix.EIO }

// Found by review (dmn). A member fails (recorded faulty in the survivor's
// superblock) and the machine reboots with the dead disk still plugged in:
// its path exists, and every read of it fails (EIO). md's assembly skips a
// device whose superblock it cannot read and starts the mirror degraded
// on the survivor (the failed member is not needed: the working count is
// the one the superblocks recorded). The daemon's restart leaves out only
// paths that are absent (CreateSpec.SkipAbsent), so the whole array is
// refused ("input/output error (leave it out to assemble the array
// without it)") and stays pending: not served, although its surviving
// copy is complete and the failure was recorded before the stop.
func TestReviewDmnFailedDiskUnreadableAtRestartStaysPending(t *testing.T) {
	paths := files(t, 2, 16<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	failAndStop(t, a, 1) // role 1 recorded faulty; clean stop
	fakeDevices(t)
	// The restart's assembly opens the dead disk through a device whose
	// reads fail (installed before any array is opened).
	saved := openOnce
	t.Cleanup(func() { openOnce = saved })
	openOnce = func(members []string, spec array.CreateSpec) (*array.Array, error) {
		spec.OpenDevice = func(p string) (array.Device, error) {
			d, err := ublk.OpenMember(p)
			if err != nil || p != paths[1] {
				return d, err
			}
			return reviewDmnEIODev{d}, nil
		}
		return saved(members, spec)
	}
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
		t.Fatalf("restart with the failed member %s still plugged in and unreadable: %d started, %d failed (pending %v); want the array started degraded on %s, as md's assembly starts it",
			paths[1], started, failed, pending, paths[0])
	}
	if st := s.a.Status(); st.Members[0].State != "active" || st.Members[1].State == "active" {
		t.Errorf("started with members %+v; want role 0 active, role 1 not", st.Members)
	}
}
