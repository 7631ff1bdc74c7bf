package array

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by reviewing 9744f34: a rebuild that fails (a block no source can read) followed by a pending
// resync that fails on the same block: since 9744f34 the resync's end
// resumed the rebuild, whose end started the resync again, without end.
// nextJob's own doc says a failed rebuild waits for the next assembly,
// re-add or spare; md's fix_sync_read_error sets recovery_disabled so
// that a recovery that cannot read from anywhere is not retried.
func TestFailedRebuildAndResyncDoNotLoop(t *testing.T) {
	paths := memberFiles(t, 4, 32<<20)
	a, err := Open(paths[:3], CreateSpec{Name: "l", Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(a.dataOffset + 1<<20)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	cut := powerCutCopy(t, paths[:3])
	a.Close()

	var hits atomic.Int64
	memberRW = func(d Device, p []byte, o int64, write bool) error {
		if p != nil && !write && o < off+4096 && off < o+int64(len(p)) {
			hits.Add(1)
			return unix.EIO
		}
		return deviceRW(d, p, o, write)
	}
	t.Cleanup(func() { memberRW = deviceRW })
	b, err := Open(cut, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.StartBackground()
	b.WaitSync()
	t.Logf("after assembly: %s %s", b.SyncStatus().LastAction, b.SyncStatus().LastResult)
	if err := b.Fail(2); err != nil {
		t.Fatal(err)
	}
	if err := b.Replace(2, paths[3]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	h1 := hits.Load()
	time.Sleep(1500 * time.Millisecond)
	h2 := hits.Load()
	t.Logf("read errors: %d after 0.5s, %d after 2s; last: %s %s", h1, h2, b.SyncStatus().LastAction, b.SyncStatus().LastResult)
	if h2-h1 > 20 {
		t.Fatalf("the failed rebuild and the failed resync restart each other without end: %d more read errors of the same lost block in 1.5s", h2-h1)
	}
}
