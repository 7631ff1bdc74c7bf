package array

import (
	"math/rand/v2"
	"testing"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// A checkpoint of the write-hole log is on the members' stable media when
// writeLogCheckpoint says it is, with nothing flushed after it: the rings
// reuse the space below it from then on, so a power cut must not bring
// back an older one (its dead entries, partly overwritten, would be
// replayed). It is also written again, from the kept buffer, by the next
// checkpoint.
func TestParityLogCheckpointDurable(t *testing.T) {
	rack := memdev.NewRack(rand.New(rand.NewPCG(3, 4)))
	paths := []string{"/c0", "/c1", "/c2"}
	for _, p := range paths {
		rack.AddDisk(p, 16<<20)
	}
	spec := CreateSpec{Level: engine.Level5, ChunkSectors: 16, RegionSectors: 128, AssumeClean: true,
		OpenDevice: func(p string) (Device, error) { return rack.Open(p) }}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.parityLogRing(0, 64<<10); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, cp := range []uint64{7, 9} {
		if ok, err := a.writeLogCheckpoint(cp, &b); !ok || err != nil {
			t.Fatalf("checkpoint %d: %v %v", cp, ok, err)
		}
		rack.PowerCut()
		for _, p := range paths {
			h, err := engine.DecodeParityLogHeader(rack.Stable(rack.Disk(p), int64(a.logOffset), engine.ParityLogHeaderSize), a.logUUID)
			if err != nil || h.Checkpoint != cp {
				t.Fatalf("%s after a power cut: checkpoint %d (%v), want %d", p, h.Checkpoint, err, cp)
			}
		}
		if cp == 7 {
			// Reopened: the second checkpoint writes through the
			// member devices of a new process.
			a.Close()
			if a, err = Open(paths, spec, false); err != nil {
				t.Fatal(err)
			}
			if _, _, err := a.parityLogRing(0, 64<<10); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.Close()
}
