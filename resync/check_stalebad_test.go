package resync

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by reviewing da0c209. r.bad[k] was cleared only when copy k's read
// of a step failed (readUnits); checkRange's search for a copy to patch the
// chosen copy's bad blocks from (isBad(k2, sec)) also looks at copies
// that read the whole step, whose bits are left over from an earlier step.
// Here member 1 fails (and is cured at) sector 100 in step 0, and member 0
// fails sector 2048+100 in step 1, which member 1 reads fine: the check
// stopped with "no copy" for a block member 1 just read.
func TestCheckStaleBadBitsFromEarlierStep(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 4096}
	arr := mustArray(t, g)
	m := newMem(g)
	img := randomImage(g, 21)
	m.writeImage(g, img)
	bad := [2]uint64{StepSectors + 100, 100} // member 0's (step 1), member 1's (step 0): same offset in their steps
	var healed [2]atomic.Bool
	m.failRead = func(role int, sector, sectors uint64) error {
		if b := bad[role]; sector < b+8 && sector+sectors > b && !healed[role].Load() {
			return errInjected
		}
		return nil
	}
	m.failWrite = func(role int, sector, sectors uint64) error {
		if b := bad[role]; sector <= b && sector+sectors >= b+8 {
			healed[role].Store(true)
		}
		return nil
	}
	s, _ := newSyncer(arr, m, Config{})
	var told []int
	res, err := s.Run(context.Background(), Job{Kind: Check, OnMemberError: func(role int, _ error) { told = append(told, role) }})
	t.Logf("check: %v; %d mismatches, %d read errors; healed %v %v", err, res.Mismatches, res.ReadErrors, healed[0].Load(), healed[1].Load())
	if err != nil {
		t.Fatalf("check stopped at a block member 1 read fine in this step (its bad bit is from step 0): %v", err)
	}
	assertCopiesEqual(t, g, m, img, "after the check")
}
