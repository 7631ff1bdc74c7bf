package array

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (cu2): the undo log of a create is one log for all
// members, and undoLog.save reads a range's pre-image under the log's one
// mutex (u.mu). A member that hangs (a device that stops answering) during
// the dirty mark of a new array (the daemon's start, SetClean(false)),
// whose first bitmap write must save what it replaces, blocks in that read
// with u.mu held: every write of every other member blocks on u.mu too.
// The healthy member is given up as well (the timeout), and the undo of
// the refused create (CloseUndoCreated → undoWrites → restore, which takes
// u.mu) never returns, while undoWrites promises to give a member with a
// write still out up after a bounded wait and name it. The read is now
// made outside the lock.
func TestHungMemberCreateUndo(t *testing.T) {
	rack := memdev.NewRack(rand.New(rand.NewPCG(7, 7)))
	rack.AddDisk("/m0", 16<<20)
	d1 := rack.AddDisk("/m1", 16<<20)
	spec := CreateSpec{Undoable: true, Level: engine.Level1, RegionSectors: testRegion,
		OpenDevice: func(p string) (Device, error) { return rack.Open(p) }}
	a, err := Open([]string{"/m0", "/m1"}, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	a.MemberTimeout = time.Second // the healthy member's write takes far less, even under -race
	// m1 stops answering before the dirty mark.
	rack.Hang(d1)
	t.Cleanup(func() { rack.Release(d1) })
	serr := a.SetClean(false)
	st := a.Status()
	t.Logf("dirty mark: %v; members %+v", serr, st.Members)
	if serr != nil || a.Engine.State().Members[0].State != engine.MemberActive {
		t.Errorf("m1 hung: the dirty mark of the new array failed or failed the healthy m0 too (md fails only the hung member): err %v, m0 %v",
			serr, a.Engine.State().Members[0].State)
	}
	// The driver refuses the device: the create is undone.
	done := make(chan error, 1)
	go func() { done <- a.CloseUndoCreated() }()
	select {
	case err := <-done:
		t.Logf("undo: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("CloseUndoCreated did not return 30s after the refusal (member timeout %v, undo wait bounded by it): the undo hangs on the hung member m1 (undoLog.restore waits for u.mu, held by a save reading m1)", a.MemberTimeout)
	}
}
