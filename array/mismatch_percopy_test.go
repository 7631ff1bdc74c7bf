package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review: md adds the differing range to mismatch_cnt once per copy that differs
// from the first good copy (raid1 process_checks, raid10
// sync_request_write: atomic64_add inside the loop over copies). A block
// whose two other copies both differ on a 3-copy array counts twice; it
// was counted once.
func TestMismatchCountsEachDifferingCopy(t *testing.T) {
	for _, spec := range []CreateSpec{
		{Level: engine.Level1, AssumeClean: true},
		{Level: engine.Level10, Layout: engine.LayoutN3, ChunkSectors: 16, AssumeClean: true},
	} {
		t.Run(spec.Level.String()+spec.Layout.String(), func(t *testing.T) {
			paths := memberFiles(t, 3, 16<<20)
			a, err := Open(paths, spec, true)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			// Sector 0's copies are at member sector 0 on all three
			// members (raid1, and n3 on 3 members): 1 and 2 differ from 0.
			scribble(t, a, paths[1], 0, 4096, 0x11)
			scribble(t, a, paths[2], 0, 4096, 0x22)
			if err := a.Check(false); err != nil {
				t.Fatal(err)
			}
			a.WaitSync()
			if s := a.SyncStatus(); s.MismatchCnt != 2*8 {
				t.Fatalf("mismatch_cnt %d, want 16 (8 sectors differing on each of two copies)", s.MismatchCnt)
			}
		})
	}
}
