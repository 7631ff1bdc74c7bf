package array

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (cu): the dirty mark of a new array (the daemon's start:
// SetClean(false)) hangs on m1 past the member timeout: the superblock
// write is given up (m1 failed), and stays out on the device
// (Member.sbWriting, lateBegin). The driver then refuses the device:
// CloseUndoCreated writes back what the create overwrote and reports
// success, so the daemon says "the members are as they were", while the
// given-up write is still out and lands after the restore: m1 holds the
// new array's superblock after all. The undo now waits (bounded) for I/O
// given up on a member, and says so when it is still out, as everything
// else waits for or refuses it (lateOn, sbWriting).
func TestUndoWaitsForGivenUpSuperblockWrite(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	fillRandom(t, 21, paths...)
	before := contents(t, paths...)
	a, err := Open(paths, CreateSpec{Undoable: true, Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	a.MemberTimeout = 200 * time.Millisecond
	// m1's device takes the superblock write and holds it (a hung
	// device); it carries it out once released.
	release, landed := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	armed.Store(true)
	orig := writeSuperblock
	t.Cleanup(func() { writeSuperblock = orig })
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path != paths[1] || !armed.CompareAndSwap(true, false) {
			return orig(m, b)
		}
		data := append([]byte(nil), b...)
		<-release
		f, err := os.OpenFile(paths[1], os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteAt(data, engine.SuperblockOffset)
			f.Close()
		}
		close(landed)
		return err
	}
	serr := a.SetClean(false)
	t.Logf("dirty mark: %v; members %+v", serr, a.Status().Members)
	if armed.Load() {
		t.Fatal("setup: no superblock write went to m1")
	}
	// The driver refuses the device.
	uerr := a.CloseUndoCreated()
	close(release)
	<-landed
	if uerr != nil {
		t.Logf("undo said: %v", uerr)
		return
	}
	after := contents(t, paths...)
	for i := range paths {
		if string(after[i]) != string(before[i]) {
			t.Errorf("CloseUndoCreated reported the members as they were, but %s changed after it (a superblock write given up after the member timeout landed after the undo)", paths[i])
		}
	}
}
