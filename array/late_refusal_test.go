package array

import (
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// A re-add of a failed device that still hangs (a superblock write given
// up after the member timeout is out on it) should be refused at once,
// as the commit says; it reads the device's superblock first
// (previousRole) and blocks there, holding spareMu.
func TestReAddOfHungDeviceRefusedAtOnce(t *testing.T) {
	a, rack, hung := hungRAID1(t, 1)
	a.MemberTimeout = 50 * time.Millisecond
	rack.Hang(hung)
	_ = a.SetClean(false) // h1's superblock write is given up: failed, late
	if st := a.Engine.State().Members[1].State; st != engine.MemberFaulty || !lateOn(a.Members[1]) {
		t.Fatalf("setup: role 1 %s, late %v", st, lateOn(a.Members[1]))
	}
	done := make(chan error, 1)
	go func() { done <- a.ReAdd("/h1") }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "still out") {
			t.Fatalf("re-add: %v", err)
		}
	case <-time.After(2 * time.Second):
		rm := make(chan error, 1)
		go func() { rm <- a.Remove(1) }()
		select {
		case err := <-rm:
			t.Logf("remove meanwhile: %v", err)
		case <-time.After(time.Second):
			t.Log("remove meanwhile: blocked too (spareMu)")
		}
		t.Fatal("re-add of a device with given-up I/O out blocks (previousRole reads the hung device before the late check), holding spareMu")
	}
}

// A device with given-up I/O out is not let go when another device
// replaces it (it stays open, an exclusive claim on a block device, as md
// keeps a device with I/O pending), nor made a spare; once the I/O has
// returned it is closed.
func TestLateDeviceNotReleasedNorMadeSpare(t *testing.T) {
	paths, a, l := raid1LateThird(t, 4)
	released := false
	defer func() {
		if !released {
			close(l.release)
		}
	}()
	a.MemberTimeout = 200 * time.Millisecond
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(1, paths[2]); err != nil { // hangs on the rebuild's first write
		t.Fatal(err)
	}
	<-l.hung
	a.WaitSync()
	old := a.Members[1]
	if !lateOn(old) || a.Status().Members[1].State != "faulty" {
		t.Fatal("setup")
	}
	if err := a.Replace(1, paths[3]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if !openHere(t, paths[2]) {
		t.Fatal("replace closed a device with its late write out")
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	// (Refused as in use when it is opened again, the array holding it
	// still: O_EXCL for a block device, the lock for a file; or as
	// having I/O out.)
	if err := a.AddSpareForce(paths[2], true); err == nil || !strings.Contains(err.Error(), "still out") && !errors.Is(err, unix.EBUSY) {
		t.Fatalf("a device with given-up I/O out made a spare: %v", err)
	}
	close(l.release)
	released = true
	<-l.landed
	deadline := time.Now().Add(5 * time.Second)
	for openHere(t, paths[2]) {
		if time.Now().After(deadline) {
			t.Fatal("the replaced device is still open after its late write returned")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openHere reports whether this process has path open (/proc/self/fd).
func openHere(t *testing.T, path string) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if p, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && p == path {
			return true
		}
	}
	return false
}

// hungRAID1 is a raid1 of /h0 and /h1 (4 MiB each, bitmap regions of
// 1 MiB) on an in-memory rack, with spares, and /h1's disk, to hang: /h1
// is released and the array closed when the test ends.
func hungRAID1(t *testing.T, seed uint64, spares ...string) (*Array, *memdev.Rack, *memdev.Disk) {
	t.Helper()
	rack := memdev.NewRack(rand.New(rand.NewPCG(seed, seed)))
	for _, p := range append([]string{"/h0", "/h1"}, spares...) {
		rack.AddDisk(p, 4<<20)
	}
	spec := CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048, Spares: spares,
		OpenDevice: func(p string) (Device, error) { return rack.Open(p) }}
	a, err := Open([]string{"/h0", "/h1"}, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	hung := rack.Disk("/h1")
	t.Cleanup(func() { rack.Release(hung); a.Close() })
	return a, rack, hung
}
