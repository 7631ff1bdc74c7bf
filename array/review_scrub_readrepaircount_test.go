package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// Found by review: a raid1/10 check that meets a latent bad sector on one
// copy rewrites it from the other copy and reads it back (md's scrub:
// fix_sync_read_error, which counts it in the member's corrected_errors
// and logs "read error corrected"). README's metric
// ublkraid_read_repairs_total is "ranges rewritten from another copy after
// a read error, and read back", and a raid5/6 check counts its rewrites
// there (OnReadErrorRewritten); the raid1/10 check's rewrite is counted
// nowhere: not in the metric, not in the job's log line, not in detail.
// A disk whose sectors go bad is found by exactly this scrub, and the
// operator is told nothing.
func TestReviewScrubCheckReadRepairCounted(t *testing.T) {
	for _, spec := range []CreateSpec{
		{Level: engine.Level1, AssumeClean: true, NoBitmap: true},
		{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 128, AssumeClean: true, NoBitmap: true},
	} {
		t.Run(spec.Level.String(), func(t *testing.T) {
			paths := memberFiles(t, 2, 8<<20)
			setRW := hookRW(t) // (before Open: its repair worker takes memberRW)
			a, err := Open(paths, spec, true)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			// One latent bad 4 KiB block on member 1, 64 KiB in (sector 128:
			// on both members for raid1 and raid10 n2 over 2 members).
			off := int64(a.dataOffset + 128<<9)
			bad := &badSectorRW{bad: map[Device][2]int64{a.Members[1].Device: {off, off + 4096}}}
			setRW(bad.rw)
			t.Cleanup(func() { memberRW = deviceRW })
			a.sync.s = resync.New(a.Engine, a.xbar, newMemberIO(a), resync.Config{})
			var rep SyncReport
			a.SetSyncLog(func(msg string, r SyncReport, err error) {
				if msg == "sync ended" {
					rep = r
				}
			})
			before := a.ReadRepairs()
			if err := a.Check(false); err != nil {
				t.Fatal(err)
			}
			a.WaitSync()
			s := a.SyncStatus()
			if s.LastCheckResult != "ok" || bad.hits == 0 {
				t.Fatalf("check: %+v, read errors met %d", s, bad.hits)
			}
			if len(bad.bad) != 0 {
				t.Fatalf("the check did not rewrite the bad block (md's scrub does)")
			}
			if st := a.Engine.State().Members[1].State; st != engine.MemberActive {
				t.Fatalf("member 1 is %v after a repaired read error", st)
			}
			m := a.Metrics("ublkb0")
			if got := a.ReadRepairs() - before; got == 0 {
				t.Errorf("the check rewrote member 1's bad block from member 0 and read it back, but ublkraid_read_repairs_total stayed %d (log line: read_errors_rewritten %d, metric %d): the repair is reported nowhere",
					before, rep.ReadErrorsRewritten, m.ReadRepairs)
			}
		})
	}
}
