package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A resync resumed part-way (the superblock's resync offset after an
// unclean stop) starts at that position: its speed, exported as
// ublkraid_sync_speed_bytes_per_second and behind detail's ETA, is what
// this run did over its time, as for a resumed rebuild. It counted
// everything below the start as done by this run: a resync resumed at
// 90% of a large array showed terabytes per second and finish=0.0min.
func TestSyncSpeedOfResumedResync(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, NoBitmap: true, SyncMinBytes: 64 << 10, SyncMaxBytes: 256 << 10}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	start := a.Engine.ArraySectors() / 2
	a.mu.Lock()
	a.sync.fullPending, a.sync.fullPos = true, start
	a.mu.Unlock()
	a.StartBackground()
	time.Sleep(100 * time.Millisecond)
	y := a.sync
	y.mu.Lock()
	y.started = y.started.Add(-100 * time.Second) // as if it had run 100 s
	y.mu.Unlock()
	s := a.SyncStatus()
	if s.Action != "resync" {
		t.Fatalf("no resync running: %+v", s)
	}
	if s.Done < start<<9 {
		t.Fatalf("resync at %d bytes, resumed at %d", s.Done, start<<9)
	}
	did := float64(s.Done - start<<9)
	if s.SpeedBytes > did/99 {
		t.Fatalf("speed %.0f B/s after ~100 s in which the resync did %.0f bytes (from %d to %d)", s.SpeedBytes, did, start<<9, s.Done)
	}
}
