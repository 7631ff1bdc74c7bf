package daemon

import (
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review. Review (fixtwo, 9a62f38): openRetry waits (up to 10 s) while a member
// is still held (EBUSY) by a server of this array that is exiting: a
// daemon restarted while the previous one still closes its members, or a
// grow's re-assembly. 9a62f38 makes array.Open leave out, at a restart,
// any listed device whose open fails with EBUSY, so Open no longer
// returns EBUSY and openRetry never waits: a spare (or a member recorded
// failed or rebuilding) still held for a moment is silently left out of
// the array for the whole run, and a held active member makes the start
// fail with ErrMemberAbsent at once instead of being waited for.
func TestReviewFixtwoRestartDoesNotWaitForExitingServer(t *testing.T) {
	for _, held := range []string{"spare", "active member"} {
		t.Run(held, func(t *testing.T) {
			paths := files(t, 3, 16<<20)
			a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, Spares: paths[2:]}, true)
			if err != nil {
				t.Fatal(err)
			}
			uuid := a.Status().UUID
			if err := a.SetClean(true); err != nil {
				t.Fatal(err)
			}
			a.Close()

			// The exiting server still holds one device; it lets go right
			// after the first assembly attempt.
			hp := paths[2]
			if held == "active member" {
				hp = paths[1]
			}
			holder, err := ublk.OpenMember(hp)
			if err != nil {
				t.Fatal(err)
			}
			saved := openOnce
			t.Cleanup(func() { openOnce = saved })
			tries := 0
			openOnce = func(members []string, spec array.CreateSpec) (*array.Array, error) {
				tries++
				b, err := saved(members, spec)
				if tries == 1 {
					holder.Close()
				}
				return b, err
			}
			m := NewManager(nil, ManagerOptions{})
			e := StateEntry{Number: 0, UUID: uuid, Members: slices.Clone(paths)}
			b, err := openRetry(e.Members, m.restoreSpec(e))
			if err != nil {
				t.Fatalf("restart while the exiting server still holds the %s %s (it lets go after the first attempt, %d attempts made): %v", held, hp, tries, err)
			}
			defer b.Close()
			if len(b.Absent) > 0 || !slices.Contains(b.Spares(), paths[2]) {
				t.Fatalf("restart while the exiting server still holds the %s %s (it lets go after the first attempt, %d attempts made): started without it: absent %v, spares %v, warnings %v",
					held, hp, tries, b.Absent, b.Spares(), b.Warnings)
			}
		})
	}
}
