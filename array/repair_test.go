package array

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A read repair waits for a user write in flight to its range and then
// copies the newest data: it never puts back what the write replaced.
func TestReadRepairWaitsForWrites(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const sector, n = 2048, 8
	scribble(t, a, paths[0], sector<<9, n<<9, 0x11) // the good copy
	scribble(t, a, paths[1], sector<<9, n<<9, 0xee) // unreadable, say

	if !a.barrier.Enter(sector, n) { // a user write to the range is in flight
		t.Fatal("Enter failed with nothing raised")
	}
	a.requestRepair(sector, n, 1<<1)
	time.Sleep(50 * time.Millisecond)
	if a.ReadRepairs() != 0 || dataOf(t, a, paths[1])[sector<<9] != 0xee {
		t.Fatal("the repair went ahead while a write to its range was in flight")
	}
	scribble(t, a, paths[0], sector<<9, n<<9, 0x22) // the write lands on both
	scribble(t, a, paths[1], sector<<9, n<<9, 0x22)
	a.barrier.Exit(sector, n)
	waitFor(t, "the repair ran", func() bool { return a.ReadRepairs() == 1 })
	want := bytes.Repeat([]byte{0x22}, n<<9)
	for i, p := range paths {
		if got := dataOf(t, a, p)[sector<<9 : (sector+n)<<9]; !bytes.Equal(got, want) {
			t.Fatalf("copy %d after the repair holds %#x, want the write's 0x22", i, got[0])
		}
	}

	// Without a write in the way it rewrites the bad copy from the good.
	scribble(t, a, paths[1], sector<<9, n<<9, 0xee)
	a.requestRepair(sector, n, 1<<1)
	waitFor(t, "the second repair ran", func() bool { return a.ReadRepairs() == 2 })
	if got := dataOf(t, a, paths[1])[sector<<9 : (sector+n)<<9]; !bytes.Equal(got, want) {
		t.Fatalf("the bad copy was not rewritten: %#x", got[0])
	}
}

// Close ends while a read repair waits for a write that no queue will
// finish (the queues are gone) and a check waits for the repair: the
// check's stop used to wait for the repair, which was stopped only after
// it (found by the array model: a dead array's Close never returned).
func TestCloseStopsRepairWaitingForWrites(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	const sector, n = 0, 8
	if !a.barrier.Enter(sector, n) { // a write in flight, never finished
		t.Fatal("Enter failed with nothing raised")
	}
	a.requestRepair(sector, n, 1<<1)
	waitFor(t, "the repair waits for the write", func() bool { return len(a.xbar.sem) == 1 })
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the check reaches the repair's range (or not: Close must end either way)
	closed := make(chan struct{})
	go func() {
		a.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // a deadlock, not a slow Close
		t.Fatal("Close did not return: the check waits for the repair, the repair for the write")
	}
}

// A read repair whose source copy is failed, and its role given to a
// spare, between the state the repair planned with and its read: the read
// is served by the spare (whatever it holds), which must not be written
// over the bad copy as good data. Found by the array model: a repair came
// late, after the model failed a member and a spare took its role, and
// wrote the spare's zeroes over a current copy.
func TestReadRepairSourceReplacedMidRepair(t *testing.T) {
	paths := memberFiles(t, 4, 32<<20)
	const sector, n = 2048, 8
	// The repair worker's I/O goes through memberRW as it was at Open.
	var (
		mu     sync.Mutex
		armed  func(d Device, off int64) bool // the read to hook
		fire   func()
		once   sync.Once
		hooked = make(chan struct{})
	)
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		mu.Lock()
		hit := !write && p != nil && armed != nil && armed(d, off)
		mu.Unlock()
		if hit {
			fired := false
			once.Do(func() { fired = true; fire(); close(hooked) })
			if fired {
				return unix.EIO // so the repair turns to role 2
			}
		}
		return deviceRW(d, p, off, write)
	}
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths[:3], CreateSpec{Level: engine.Level1, AssumeClean: true, Spares: paths[3:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	scribble(t, a, paths[0], sector<<9, n<<9, 0x22) // good
	scribble(t, a, paths[1], sector<<9, n<<9, 0xee) // the bad copy
	scribble(t, a, paths[2], sector<<9, n<<9, 0x22) // good
	scribble(t, a, paths[3], sector<<9, n<<9, 0x99) // the spare's old content

	activated := make(chan error, 1)
	a.OnSpareActivated = func(role int, path string, err error) { activated <- err }
	a.mu.Lock()
	dev0 := a.Members[0].Device
	a.mu.Unlock()
	mu.Lock()
	armed = func(d Device, off int64) bool { return d == dev0 && off == int64(a.dataOffset+sector<<9) }
	fire = func() {
		// Role 2 fails and the spare takes it while the repair, which
		// planned with role 2 in sync, reads role 0.
		if err := a.Fail(2); err != nil {
			t.Errorf("fail 2: %v", err)
		}
		select {
		case err := <-activated:
			if err != nil {
				t.Errorf("spare activation: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("no spare activation")
		}
	}
	mu.Unlock()
	a.requestRepair(sector, n, 1<<1)
	select {
	case <-hooked:
	case <-time.After(10 * time.Second):
		t.Fatal("the repair did not read role 0")
	}
	a.WaitSync() // the spare's rebuild, which waited for the repair
	if got := dataOf(t, a, paths[1])[sector<<9]; got == 0x99 {
		t.Fatal("the repair copied the spare's old data over the bad copy")
	}
	if got := dataOf(t, a, paths[3])[sector<<9]; got != 0x22 {
		t.Fatalf("the spare holds %#x after its rebuild, want 0x22", got)
	}
}

// A read repair reads each rewrite back, as md's fix_read_error: a copy
// whose sector still fails to read after the rewrite is failed (here its
// reads always fail, its writes succeed), not counted as repaired and
// kept to fail the next read again.
func TestReadRepairVerifiesRewrite(t *testing.T) {
	paths := memberFiles(t, 3, 32<<20)
	const sector, n = 2048, 8
	failReadsAt := failReads(t)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	scribble(t, a, paths[0], sector<<9, n<<9, 0x22)
	scribble(t, a, paths[1], sector<<9, n<<9, 0xee) // the bad copy
	scribble(t, a, paths[2], sector<<9, n<<9, 0x22)
	a.mu.Lock()
	failReadsAt(a.Members[1].Device, int64(a.dataOffset+sector<<9))
	a.mu.Unlock()
	a.requestRepair(sector, n, 1<<1)
	waitFor(t, "the bad copy failed", func() bool { return a.Engine.State().Members[1].State == engine.MemberFaulty })
	if got := a.ReadRepairs(); got != 0 {
		t.Fatalf("%d repairs counted, want none: the rewrite did not read back", got)
	}
}

// A member whose read errors keep being repaired is failed after
// maxCorrReadErrors of them (md's max_corr_read_errors), the count halved
// for every hour without one; a failed read counts once, however many
// retry units of it are reported for repair, and reads that fail apart
// count apart, in any order; the last copy is kept (and repaired).
func TestReadErrorBudget(t *testing.T) {
	a, err := Open(memberFiles(t, 3, 32<<20), CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	now := time.Now()
	report := func(role int, sector uint64) uint64 {
		return a.countReadErrors(repairReq{sector, 8, 1 << uint(role), -1}, now)
	}
	state := func(role int) engine.MemberState { return a.Engine.State().Members[role].State }
	// Two 64 KiB reads fail together, their 4 KiB units reported for
	// repair interleaved: two errors.
	a.countReadErr(1, engine.IORead, -5)
	a.countReadErr(1, engine.IORead, -5)
	a.countReadErr(1, engine.IOWrite, -5)                 // (a write's error is not a read error)
	a.countReadErr(1, engine.IORead, -int32(unix.EAGAIN)) // (nor a member too busy to take a read)
	for u := range uint64(16) {
		for _, base := range []uint64{0, 4096} {
			if report(1, base+u*8) != 1<<1 {
				t.Fatalf("unit %d: role 1 no longer to be repaired", u)
			}
		}
	}
	// 18 more failed reads, each reported once, contiguous or not (one
	// timed out: a read error too, as in md): 20.
	for i := range maxCorrReadErrors - 2 {
		res := int32(-5)
		if i == 0 {
			res = -int32(unix.ETIMEDOUT)
		}
		a.countReadErr(1, engine.IORead, res)
		if report(1, uint64(i)*8) != 1<<1 || state(1) != engine.MemberActive {
			t.Fatalf("error %d: role 1 failed", i+3)
		}
	}
	now = now.Add(time.Hour) // halved: 10 more before the budget is spent
	for i := range maxCorrReadErrors / 2 {
		a.countReadErr(1, engine.IORead, -5)
		if report(1, uint64(100+i)*1024) != 1<<1 || state(1) != engine.MemberActive {
			t.Fatalf("error %d of the second hour: role 1 failed", i+1)
		}
	}
	a.countReadErr(1, engine.IORead, -5)
	if report(1, 200*1024) != 0 || state(1) != engine.MemberFaulty {
		t.Fatalf("one error past the budget: role 1 %v, want faulty and not repaired", state(1))
	}
	// Role 2 is the last copy now that role 1 is out and role 0 fails too.
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	for i := range 2 * maxCorrReadErrors {
		a.countReadErr(2, engine.IORead, -5)
		if got := report(2, uint64(i)*1024); got != 1<<2 || state(2) != engine.MemberActive {
			t.Fatalf("error %d on the last copy: %b, state %v", i+1, got, state(2))
		}
	}
}

// A rebuild whose source copy fails a read the rewrite does not cure
// fails that source (md's fix_read_error) and goes on from the other
// copies: the job the error stopped is started again from its
// checkpoint, since the error took its member out; with a second spare,
// which takes the failed source's role first, once that spare's rebuild
// ends.
func TestRebuildGoesOnAfterItsSourceFails(t *testing.T) {
	for _, spares := range []int{1, 2} {
		paths := memberFiles(t, 3+spares, 32<<20)
		const sector = 2048
		failReadsAt := failReads(t)
		a, err := Open(paths[:3], CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true, Spares: paths[3:]}, true)
		if err != nil {
			t.Fatal(err)
		}
		a.mu.Lock()
		failReadsAt(a.Members[0].Device, int64(a.dataOffset+sector<<9))
		a.mu.Unlock()
		if err := a.Fail(2); err != nil {
			t.Fatal(err)
		}
		want := engine.MemberFaulty
		if spares == 2 {
			want = engine.MemberActive // (the second spare, rebuilt)
		}
		waitFor(t, fmt.Sprintf("%d spares: the rebuilds ended", spares), func() bool {
			a.WaitSync()
			st := a.Engine.State()
			return st.Members[0].State == want && st.Members[1].State == engine.MemberActive && st.Members[2].State == engine.MemberActive
		})
		a.Close()
	}
}

// failReads makes the members' synchronous I/O (memberRW, as taken at
// Open) fail every read that covers byte off of device d, once armed with
// the returned function; writes go through. The test's end restores it.
func failReads(t *testing.T) (arm func(d Device, off int64)) {
	var (
		mu  sync.Mutex
		bad Device
		at  int64
	)
	memberRW = func(d Device, p []byte, o int64, write bool) error {
		mu.Lock()
		hit := !write && p != nil && bad != nil && d == bad && o <= at && at < o+int64(len(p))
		mu.Unlock()
		if hit {
			return unix.EIO
		}
		return deviceRW(d, p, o, write)
	}
	t.Cleanup(func() { memberRW = deviceRW })
	return func(d Device, off int64) {
		mu.Lock()
		bad, at = d, off
		mu.Unlock()
	}
}
