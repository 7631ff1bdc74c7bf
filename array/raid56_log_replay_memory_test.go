package array

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A crafted (or merely full) write-hole log of header-only entries
// (Logged 0: 4 KiB each on disk) whose rows span a whole chunk makes the
// recovery at assembly hold one chunk of computed parity per entry at once
// (recoverParityLog's outs): memory grows as entries x chunk size, not with
// the log area's size. Here 64 entries (256 KiB) per member make it hold
// ~190 MiB at once; the whole 9 MiB areas of these 96 MiB members hold
// 6720 such entries (16 GiB of heap measured); with 64 MiB areas and
// 64 MiB chunks it is terabytes. Found by review; the replay now takes
// the entries one at a time, newest first, in pieces of rows.
func TestParityLogReplayMemoryBounded(t *testing.T) {
	paths := memberFiles(t, 3, 96<<20)
	spec := CreateSpec{Level: engine.Level5, ChunkSectors: 2048}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	g := *a.Engine.Parity
	sb := *a.SBs[0]
	a.Close() // dirty
	t.Logf("log area %d bytes per member, chunk %d sectors, %d stripes", sb.LogBytes, g.ChunkSectors, g.Stripes())

	seq := uint64(100)
	entries := 0
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		for o := uint64(engine.ParityLogHeaderSize); o+engine.ParityLogHeaderSize <= sb.LogBytes && o <= 64*engine.ParityLogHeaderSize; o += engine.ParityLogHeaderSize {
			e := engine.ParityLogEntry{Array: sb.ArrayUUID, Seq: seq, Stripe: seq % g.Stripes(), RowLo: 0, RowHi: g.ChunkSectors,
				Logged: 0, Written: 1, Parity: 1}
			seq++
			b := make([]byte, engine.ParityLogHeaderSize)
			if _, err := e.Encode(b, g); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(b, int64(sb.LogOffset+o)); err != nil {
				t.Fatal(err)
			}
			entries++
		}
		f.Close()
	}
	logTotal := uint64(len(paths)) * sb.LogBytes

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	b, err := Open(paths, CreateSpec{Level: -1}, false)
	close(stop)
	wg.Wait()
	if err == nil {
		b.Close()
	}
	grown := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("%d crafted entries in %d bytes of log areas; assembly err %v; peak heap growth %d MiB", entries, logTotal, err, grown>>20)
	if limit := int64(64 << 20); grown > limit {
		t.Fatalf("assembly over %d bytes of log areas grew the heap by %d MiB (limit %d MiB): the replay holds a chunk of parity per entry at once", logTotal, grown>>20, limit>>20)
	}
}
