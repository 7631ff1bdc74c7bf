package array

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (resume). A raid1 without a bitmap whose rebuild of
// role 1 stopped at a block no copy can read (ErrNoCopy: it waits for the
// next assembly, re-add or spare, role 1 stays rebuilding, readable below
// its offset X = 8192). A write then leaves sectors 8000..8007 (below X)
// different between the copies (Executor.Unsynced: it failed on the kept
// last copy, role 0, and reached role 1), so the resync kicked for the mark
// must make them equal again. It starts at the marked sector (8000), and
// its steps of 2048 sectors from there straddle X: role 1 is not readable
// for [8000, 10048), so the step sees one copy and skips it; the resync
// ends, nothing pending, reads balance again over both copies and answer
// either version of those sectors.
func TestReviewResumeResyncStepStraddlesRebuildOffset(t *testing.T) {
	paths := memberFiles(t, 3, 32<<20)
	var bad atomic.Pointer[Device]
	var from atomic.Int64 // absolute byte offset from which bad's reads fail
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		// Role 0 cannot read member sectors 8192+ (the rebuild's source):
		// sync I/O only (an array's memberIO takes memberRW at Open).
		if b := bad.Load(); b != nil && d == *b && !write && p != nil && off >= from.Load() {
			return errors.New("injected unreadable block")
		}
		return deviceRW(d, p, off, write)
	}
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths[:2], CreateSpec{Name: "r", Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	from.Store(int64(a.dataOffset) + 8192<<9)
	dev := a.Members[0].Device
	bad.Store(&dev)
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(1, paths[2]); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, a)
	a.WaitSync()
	m := a.Engine.State().Members[1]
	if m.State != engine.MemberRebuilding || m.RebuildOffset != 8192 {
		t.Fatalf("setup: role 1 is %+v, want rebuilding at 8192 (the rebuild stopped at the unreadable block): %+v", m, a.SyncStatus())
	}
	bad.Store(nil)

	// A write to sectors 8000..8007 reached role 1 and failed on role 0,
	// the kept last copy (exec.go: Unsynced).
	scribble(t, a, paths[0], 8000<<9, 4096, 0xbb)
	scribble(t, a, paths[2], 8000<<9, 4096, 0xaa)
	a.markUnsynced(8000, 8)
	waitIdle(t, a)
	a.WaitSync()
	waitIdle(t, a)

	if pending, _ := a.fullResync(); pending || a.needsResync() {
		t.Fatalf("resync still pending after it ran: %+v", a.SyncStatus())
	}
	if m := a.Engine.State().Members[1]; m.State != engine.MemberRebuilding || m.RebuildOffset <= 8008 {
		t.Fatalf("role 1 is %+v", m)
	}
	d0, d2 := dataOf(t, a, paths[0]), dataOf(t, a, paths[2])
	if !bytes.Equal(d0[8000<<9:8008<<9], d2[8000<<9:8008<<9]) {
		t.Fatalf("the resync of the range marked unsynced (sectors 8000..8007) ended with nothing pending, but the copies still differ there "+
			"(role 0 %#x, role 1 %#x), and role 1 is readable there (rebuilt to sector %d): reads balance over both and answer either (last job: %s %s)",
			d0[8000<<9], d2[8000<<9], a.Engine.State().Members[1].RebuildOffset, a.SyncStatus().LastAction, a.SyncStatus().LastResult)
	}
}
