package array

import (
	"bytes"
	"testing"
	"time"

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
