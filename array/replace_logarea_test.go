package array

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// A raid5/6 replace onto a device that cannot take writes in its
// write-hole log area (bad sectors there) is refused: that is known
// before the active member is failed (the area is the new device's,
// written before it takes the role), so a refused replace must leave
// the array as it was, not degraded.
func TestReplaceOntoBadLogAreaKeepsMember(t *testing.T) {
	for _, viaSpare := range []bool{false, true} {
		name := "new"
		if viaSpare {
			name = "spare"
		}
		t.Run(name, func(t *testing.T) {
			rack := memdev.NewRack(rand.New(rand.NewPCG(7, 9)))
			paths := []string{"/r0", "/r1", "/r2", "/r3"}
			for _, p := range paths {
				rack.AddDisk(p, 16<<20)
			}
			spec := CreateSpec{Level: engine.Level5, ParityLayout: engine.LeftSymmetric, ChunkSectors: 16, AssumeClean: true,
				OpenDevice: func(p string) (Device, error) { return rack.Open(p) }}
			a, err := Open(paths[:3], spec, true)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if viaSpare {
				if err := a.AddSpare(paths[3]); err != nil {
					t.Fatal(err)
				}
			}
			rack.SetFaults(rack.Disk(paths[3]), memdev.Fault{Ops: memdev.OpWrite, Off: int64(a.logOffset), Len: int64(a.logBytes), Err: unix.EIO})
			err = a.ReplaceMember(1, paths[3], false)
			a.WaitSync()
			if err == nil {
				t.Fatal("replace onto a device whose log area cannot be written succeeded")
			}
			if st := a.Status(); st.ActiveDisks != 3 || st.Members[1].Path != paths[1] {
				t.Fatalf("refused replace (%v) left the array degraded: %+v", err, st.Members)
			}
		})
	}
}
