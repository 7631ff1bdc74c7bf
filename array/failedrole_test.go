package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// After a restart a failed member is left closed; FailedRoleOf finds its
// role from its superblock (the daemon's remove by path relies on it).
// On every level (raid5/6 were bounded by an empty mirror geometry).
func TestFailedRoleOfEveryLevel(t *testing.T) {
	for _, tc := range []struct {
		level engine.Level
		n     int
	}{{engine.Level1, 3}, {engine.Level5, 4}, {engine.Level6, 5}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			paths := memberFiles(t, tc.n, 16<<20)
			a, err := Open(paths, CreateSpec{Level: tc.level, ChunkSectors: 128, AssumeClean: true}, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Fail(1); err != nil {
				t.Fatal(err)
			}
			stop(t, a)
			b, err := Open(paths, CreateSpec{}, false)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if st := b.Status().Members[1]; st.State != "faulty" || st.Path != "" {
				t.Fatalf("role 1 after the restart: %+v", st)
			}
			if r := b.FailedRoleOf(paths[1]); r != 1 {
				t.Fatalf("FailedRoleOf(%s) = %d, want 1", paths[1], r)
			}
		})
	}
}
