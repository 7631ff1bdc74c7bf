package array

import (
	"bytes"
	"errors"
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

// A member whose I/O was given up after the member timeout and which is
// re-added is rebuilt only once that I/O has returned: a late write
// landing after the rebuild copied its range would leave old data there.
func TestRebuildWaitsForLateIO(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	l := &lateRW{path: paths[2], hung: make(chan struct{}), release: make(chan struct{}), landed: make(chan struct{})}
	memberRW = l.rw
	t.Cleanup(func() { memberRW = deviceRW })
	waiting := make(chan struct{})
	var wonce sync.Once
	waitingLate = func() { wonce.Do(func() { close(waiting) }) }
	t.Cleanup(func() { waitingLate = nil })
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 50 * time.Millisecond
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
	// Re-added: its rebuild copies region 0 again.
	if err := a.ReAdd(paths[2]); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { a.WaitSync(); close(ended) }()
	select {
	case <-waiting: // the rebuild waits for the late write
	case <-ended:
	}
	close(l.release)
	<-l.landed
	<-ended
	if s := a.SyncStatus(); s.LastAction != "rebuild" || s.LastResult != "ok" {
		t.Fatalf("re-add: %+v", s)
	}
	if !bytes.Equal(dataOf(t, a, paths[0])[:1<<20], dataOf(t, a, paths[2])[:1<<20]) {
		t.Fatal("a late write from before the re-add landed on the rebuilt member")
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
	errs := writeAll(ms, []int{0, 1}, 20*time.Millisecond, func(r int) error {
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
