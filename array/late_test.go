package array

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// lateRW is a memberIO rw whose first data write to path hangs until
// released, then lands (late) and says so.
type lateRW struct {
	path    string
	once    sync.Once
	hung    chan struct{}
	release chan struct{}
	landed  chan struct{}
}

func (l *lateRW) rw(d Device, p []byte, off int64, write bool) error {
	if write && p != nil {
		if d.Props().Path == l.path {
			first := false
			l.once.Do(func() { first = true })
			if first {
				close(l.hung)
				<-l.release
				err := deviceRW(d, p, off, write)
				close(l.landed)
				return err
			}
		}
	}
	return deviceRW(d, p, off, write)
}

// raid1LateThird makes n member files and a raid1 over the first two
// (bitmap regions of 1 MiB), closed when the test ends; the first data
// write to the third hangs until l.release (lateRW).
func raid1LateThird(t *testing.T, n int) ([]string, *Array, *lateRW) {
	t.Helper()
	paths := memberFiles(t, n, 16<<20)
	l := &lateRW{path: paths[2], hung: make(chan struct{}), release: make(chan struct{}), landed: make(chan struct{})}
	memberRW = l.rw
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return paths, a, l
}

// A device whose I/O was given up after the member timeout is not re-added
// (nor removed) while that I/O is out, as md refuses to remove a device
// with I/O pending: a late write landing after the rebuild copied its
// range would leave old data there, and the queues would find the member
// busy and fail it again. The refusal changes nothing; once the I/O has
// returned the re-add rebuilds what was written meanwhile.
func TestReAddRefusedWhileLateIOIsOut(t *testing.T) {
	paths, a, l := raid1LateThird(t, 3)
	a.MemberTimeout = 2 * time.Second
	n := int(a.Engine.Geo.MemberSectors << 9)
	scribbleBytes(t, a, paths[0], 0, fill(n, 0xa0))
	scribbleBytes(t, a, paths[1], 0, fill(n, 0xa0))
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	// The new device hangs on the rebuild's first write: given up, failed.
	if err := a.Replace(1, paths[2]); err != nil {
		t.Fatal(err)
	}
	<-l.hung
	a.WaitSync()
	if st := a.Status(); st.Members[1].State != "faulty" {
		t.Fatalf("hung replacement: %+v", st.Members[1])
	}
	// A user write to region 0 while it is away.
	first, last := a.Bitmap.Regions(0, 2048)
	if !a.Bitmap.StartWrite(first, last, 0) {
		a.fl.do(func() {})
		a.fl.do(func() {})
	}
	scribbleBytes(t, a, paths[0], 0, fill(1<<20, 0xb0))
	a.Bitmap.EndWrite(first, last)
	before, err := os.ReadFile(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	gen := a.Engine.State().Gen
	if err := a.ReAdd(paths[2]); err == nil || !strings.Contains(err.Error(), "still out") {
		t.Fatalf("re-add with a late write out: %v", err)
	}
	if err := a.Remove(1); err == nil || !strings.Contains(err.Error(), "still out") {
		t.Fatalf("remove with a late write out: %v", err)
	}
	after, err := os.ReadFile(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) || a.Engine.State().Gen != gen || a.Status().Members[1].State != "faulty" {
		t.Fatal("a refused re-add or remove changed the array or the device")
	}
	close(l.release)
	<-l.landed
	for lateOn(a.Members[1]) { // the late write's goroutine ends after it landed
		time.Sleep(time.Millisecond)
	}
	// Re-added now: its rebuild copies region 0 again.
	if err := a.ReAdd(paths[2]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if s := a.SyncStatus(); s.LastAction != "rebuild" || s.LastResult != "ok" {
		t.Fatalf("re-add: %+v", s)
	}
	if !bytes.Equal(dataOf(t, a, paths[0])[:1<<20], dataOf(t, a, paths[2])[:1<<20]) {
		t.Fatal("the re-added member misses the write made while it was away")
	}
}

// Close takes the flusher away under the array lock: a superblock write
// running meanwhile (a member failure persisted from a queue) reads it.
// Run with -race: Close wrote a.fl without the lock.
func TestCloseWhilePersisting(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			// A failure recorded from the flusher's goroutine: errors once
			// the array is closed.
			a.persist(a.Engine.Update(func([]engine.MemberStatus) {}))
		}
	}()
	a.Close()
	<-done
}

// A metadata write (superblock, bitmap) given up after the member timeout
// counts as late I/O on its device until it returns.
func TestWriteAllCountsLateWrites(t *testing.T) {
	paths := memberFiles(t, 2, 4<<20)
	var ms []*Member
	for _, p := range paths {
		m, err := openMember(nil, p)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ms = append(ms, m)
	}
	release := make(chan struct{})
	errs := writeAll(ms, []int{0, 1}, time.Second, func(r int) error {
		if r == 1 {
			<-release
		}
		return nil
	})
	if errs[0] != nil || !errors.Is(errs[1], errMemberTimeout) {
		t.Fatalf("errors %v", errs)
	}
	if lateOn(ms[0]) || !lateOn(ms[1]) {
		t.Fatalf("late I/O on member 0 %v, member 1 %v; want only member 1", lateOn(ms[0]), lateOn(ms[1]))
	}
	close(release)
	waitFor(t, "the late write is counted back", func() bool { return !lateOn(ms[1]) })
}
