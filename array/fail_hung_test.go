package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (hang): fail of a member that hangs is what an operator
// does first with a hung disk (md_error: no I/O to the failed device, the
// command returns at once). Fail records the failure on the others, then
// markFailed writes the failed member's own superblock ("best effort: an
// error changes nothing") through writeAll with the member timeout; with
// --member-timeout 0 ("never") that write to the hung device is waited
// for forever, and the fail never returns (with the default, it waits the
// whole timeout). The daemon runs it under the array's operation lock,
// so the remove/replace that should follow wait behind it.
func TestFailReturnsWhileFailedMemberHangs(t *testing.T) {
	a, rack, hung := hungRAID1(t, 1)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	a.Configure(func() { a.MemberTimeout = 0 }) // --member-timeout 0: never give up
	rack.Hang(hung)
	done := make(chan error, 1)
	go func() { done <- a.Fail(1) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("fail of the hung member: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("fail of role 1 (device hung) has not returned after 5s (role 1 is %s in memory, recorded on /h0: events %d): markFailed waits for its superblock write to the hung device, which --member-timeout 0 never gives up; md's fail does no I/O to the failed device",
			a.Engine.State().Members[1].State, superblockEvents(t, rack, "/h0"))
	}
}

// superblockEvents is the events of the superblock on the rack's disk at
// path, as stable on it.
func superblockEvents(t *testing.T, rack *memdev.Rack, path string) uint64 {
	t.Helper()
	d := rack.Disk(path)
	size := rack.Size(d)
	sb, _, err := engine.ReadSuperblock(func(off int64, n int) ([]byte, error) {
		return rack.Current(d, off, n), nil
	}, size)
	if err != nil {
		t.Fatal(err)
	}
	return sb.Events
}
