package daemon

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ublk-raid/ublk-raid/array"
)

// Found by review. The sync log's mismatch_cnt is md's mismatch_cnt, in 512-byte sectors,
// as `detail` (SyncStatus.MismatchCnt) and the ublkraid_mismatch_sectors
// metric report it: a check that found 3 differing 4 KiB blocks logs 24.
// SyncReport.Mismatches counts 4 KiB blocks, and SyncLog logged it as it
// was under the name mismatch_cnt: 3, eight times less than the same
// check's mismatch_cnt in `detail`.
func TestSyncLogMismatchCntInSectors(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	SyncLog(zap.New(core))("sync ended", array.SyncReport{Kind: "check", Mismatches: 3}, nil)
	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("%d log entries", len(entries))
	}
	got, ok := entries[0].ContextMap()["mismatch_cnt"]
	if !ok {
		t.Fatalf("no mismatch_cnt in %v", entries[0].ContextMap())
	}
	if got != uint64(3*4096/512) {
		t.Fatalf("sync log mismatch_cnt = %v for 3 differing 4 KiB blocks, want %d (512-byte sectors, as detail and the metric say)", got, 3*4096/512)
	}
}
