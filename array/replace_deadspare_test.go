package array

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// deadLater is a device whose writes fail once dead is set.
type deadLater struct {
	Device
	dead *atomic.Bool
}

var errDead = errors.New("dead device")

func (d deadLater) WriteAt(p []byte, o int64) error {
	if d.dead.Load() {
		return errDead
	}
	return d.Device.WriteAt(p, o)
}

func (d deadLater) WriteAtDurable(p []byte, o int64) error {
	if d.dead.Load() {
		return errDead
	}
	return d.Device.WriteAtDurable(p, o)
}

// TestReplaceOntoDeadSpareKeepsMember: replace onto a spare that died
// while idle is refused before the member it was to replace is failed
// (md's replace never fails the original before the copy is done).
func TestReplaceOntoDeadSpareKeepsMember(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	var dead atomic.Bool
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true,
		OpenDevice: func(p string) (Device, error) {
			d, err := openFile(p)
			if err != nil || p != paths[2] {
				return d, err
			}
			return deadLater{d, &dead}, nil
		}}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.AddSpare(paths[2]); err != nil {
		t.Fatal(err)
	}
	dead.Store(true)
	err = a.ReplaceMember(1, paths[2], false)
	a.WaitSync()
	if err == nil {
		t.Error("replace onto a dead spare succeeded")
	}
	if st := a.Status(); st.ActiveDisks != 2 || st.Members[1].Path != paths[1] {
		t.Fatalf("replace onto a dead spare (err %v) left the array degraded: %+v", err, st)
	}
	if sp := a.Spares(); len(sp) != 1 || sp[0] != paths[2] {
		t.Errorf("spares after the refusal: %v, want %s still", sp, paths[2])
	}
}

// countedDeath is a device whose writes fail after the first left ones.
type countedDeath struct {
	Device
	left *atomic.Int32
}

func (d countedDeath) WriteAt(p []byte, o int64) error {
	if d.left.Add(-1) < 0 {
		return errDead
	}
	return d.Device.WriteAt(p, o)
}

func (d countedDeath) WriteAtDurable(p []byte, o int64) error {
	if d.left.Add(-1) < 0 {
		return errDead
	}
	return d.Device.WriteAtDurable(p, o)
}

// TestReplaceNewMemberFailingItsSuperblock: a new device that takes the
// check's write and then fails its superblock write is failed; replace
// says so rather than succeed.
func TestReplaceNewMemberFailingItsSuperblock(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	var left atomic.Int32
	left.Store(1 << 20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true,
		OpenDevice: func(p string) (Device, error) {
			d, err := openFile(p)
			if err != nil || p != paths[2] {
				return d, err
			}
			left.Store(1) // the check's write only
			return countedDeath{d, &left}, nil
		}}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = a.ReplaceMember(1, paths[2], false)
	a.WaitSync()
	if err == nil {
		t.Fatalf("replace by a device that failed its superblock write succeeded: %+v", a.Status())
	}
	t.Logf("replace: %v", err)
}
