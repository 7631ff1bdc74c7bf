package array

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

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

// gatedHeaderDev holds its member's durable writes of one checkpoint of
// the write-hole log's header until gate closes.
type gatedHeaderDev struct {
	Device
	a    **Array
	cp   uint64
	gate chan struct{}
}

func (d gatedHeaderDev) WriteAtDurable(p []byte, off int64) error {
	if a := *d.a; a != nil && off == int64(a.logOffset) {
		if h, err := engine.DecodeParityLogHeader(p, a.logUUID); err == nil && h.Checkpoint == d.cp {
			<-d.gate
		}
	}
	return d.Device.WriteAtDurable(p, off)
}

// A checkpoint write given up after the member timeout on a member kept
// as the last copy (a degraded raid5) may still land: no newer checkpoint
// goes to that member until it has, or the late one would take its
// header back below a checkpoint reported durable, whose dead entries
// the rings reuse.
func TestParityLogCheckpointNotOvertakenByLateOne(t *testing.T) {
	rack := memdev.NewRack(rand.New(rand.NewPCG(5, 6)))
	paths := []string{"/g0", "/g1", "/g2"}
	for _, p := range paths {
		rack.AddDisk(p, 16<<20)
	}
	var a *Array
	gate := make(chan struct{})
	spec := CreateSpec{Level: engine.Level5, ChunkSectors: 16, RegionSectors: 128, AssumeClean: true,
		OpenDevice: func(p string) (Device, error) {
			d, err := rack.Open(p)
			if err != nil || p != paths[0] {
				return d, err
			}
			return gatedHeaderDev{Device: d, a: &a, cp: 7, gate: gate}, nil
		}}
	var err error
	if a, err = Open(paths, spec, true); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MemberTimeout = 50 * time.Millisecond
	if _, _, err := a.parityLogRing(0, 64<<10); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	var b []byte
	if ok, err := a.writeLogCheckpoint(5, &b); !ok || err != nil {
		t.Fatalf("checkpoint 5: %v %v", ok, err)
	}
	if ok, err := a.writeLogCheckpoint(7, &b); ok || !errors.Is(err, errMemberTimeout) {
		t.Fatalf("checkpoint 7, its write to %s held: %v %v, want it not durable, timed out", paths[0], ok, err)
	}
	durable := uint64(5)
	if ok, err := a.writeLogCheckpoint(9, &b); ok {
		durable = 9
	} else if !errors.Is(err, errLogHeaderLate) {
		t.Fatalf("checkpoint 9, the write of 7 still out: %v", err)
	}
	close(gate)
	for deadline := time.Now().Add(10 * time.Second); lateOn(a.Members[0]); {
		if time.Now().After(deadline) {
			t.Fatal("the late write never returned")
		}
		time.Sleep(time.Millisecond)
	}
	if durable < 9 {
		if ok, err := a.writeLogCheckpoint(9, &b); !ok || err != nil {
			t.Fatalf("checkpoint 9, the late write returned: %v %v", ok, err)
		}
		durable = 9
	}
	for _, p := range paths[:2] {
		h, err := engine.DecodeParityLogHeader(rack.Current(rack.Disk(p), int64(a.logOffset), engine.ParityLogHeaderSize), a.logUUID)
		if err != nil || h.Checkpoint < durable {
			t.Fatalf("%s: checkpoint %d (%v), below %d, which was reported durable", p, h.Checkpoint, err, durable)
		}
	}
}
