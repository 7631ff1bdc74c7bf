package array

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (hang): Remove counts as "I/O still out" on a device
// only the queues' operations (Member.out) and operations already given up
// after the member timeout (lateOn); a background job's operation that
// has not reached the timeout yet (a rebuild write to a device that
// hangs) counts nowhere. A fail followed by a remove then succeeds while
// the write is out, the device is closed and free for other users, and the
// write lands on it afterwards. md counts sync I/O in nr_pending and
// answers EBUSY (the project's own Remove says so: "md refuses to remove a
// device with I/O pending ... a late write could land over what they put
// there").
func TestRemoveRefusedWhileRebuildWriteOut(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	// The first data write to the third device is taken by the device (its
	// file held, as the kernel holds it for a submitted write) and carried
	// out only when released.
	hung, release, landed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		if write && p != nil && d.Props().Path == paths[2] {
			first := false
			once.Do(func() { first = true })
			if first {
				f, err := os.OpenFile(paths[2], os.O_RDWR, 0)
				if err != nil {
					return err
				}
				defer f.Close()
				close(hung)
				<-release
				_, err = f.WriteAt(p, off)
				close(landed)
				return err
			}
		}
		return deviceRW(d, p, off, write)
	}
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	a.Configure(func() { a.MemberTimeout = time.Hour }) // (a slow device: not given up yet)
	n := int(a.Engine.Geo.MemberSectors << 9)
	scribbleBytes(t, a, paths[0], 0, fill(n, 0xa0))
	scribbleBytes(t, a, paths[1], 0, fill(n, 0xa0))
	failAndRemove(t, a, 1)
	// The new device hangs on the rebuild's first write.
	if err := a.Replace(1, paths[2]); err != nil {
		t.Fatal(err)
	}
	<-hung
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	err = a.Remove(1)
	if err != nil {
		t.Logf("remove refused: %v", err)
		return
	}
	// The device is out of the array and closed: another user takes it
	// (mdadm --zero-superblock, a new array, a filesystem) and zeroes it.
	if err := os.WriteFile(paths[2], make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	released = true
	close(release)
	<-landed
	after, err := os.ReadFile(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	changed := !bytes.Equal(after, make([]byte, 16<<20))
	t.Fatalf("Remove of role 1 succeeded (role now %s, device closed) while the rebuild's write to it was still out; the write then landed over what the device's next user wrote (changed: %v); want the remove refused as busy, as md answers EBUSY with I/O pending",
		a.Status().Members[1].State, changed)
}
