package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Close unmaps the bounce buffers of the array's jobs and the bitmap
// flusher's scratch buffers (anonymous mappings, which the garbage
// collector does not free): a daemon that adds and deletes arrays used to
// keep a few MiB per array, and the array model 1.6 MB per sequence.
func TestCloseUnmapsBuffers(t *testing.T) {
	before := mappedBuffers.Load()
	for i := range 3 {
		paths := memberFiles(t, 2, 32<<20)
		a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
		if err != nil {
			t.Fatal(err)
		}
		a.MemberTimeout = time.Minute // sync I/O runs on bounce buffers
		a.StartBackground()
		if err := a.Check(false); err != nil {
			t.Fatal(err)
		}
		a.WaitSync()
		if err := a.SetClean(false); err != nil { // a bitmap batch: scratch buffers
			t.Fatal(err)
		}
		if mappedBuffers.Load() == before {
			t.Fatalf("round %d: no buffer mapped: the test does not reach them", i)
		}
		a.Close()
		if n := mappedBuffers.Load(); n != before {
			t.Fatalf("round %d: %d buffers still mapped after Close", i, n-before)
		}
	}
}
