package array

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (p56). A healthy raid5 not stopped cleanly, a write
// torn over stripe 1 (data slot 1 new on its member, P old), its entry
// live on P's member; every member's write-hole log header torn (the
// power cut), so which entries are live is unknown. At assembly the
// member d0 of a chunk the write did not touch fails the read of its log
// header: recoverParityLog fails it, and the array is now dirty and
// degraded. recoverParityLog's own rule for a dirty degraded array whose
// log has no header is to refuse it unless forced
// (TestTornLogHeadersDirtyDegradedRefused, md's "cannot start dirty
// degraded array"); but it decides from asm.Degraded, taken from the
// superblocks before the member failed here, so it starts, skips every
// entry, and d0's rows (never written) are reconstructed from the torn
// stripe's stale parity: they read back as data nobody wrote.
func TestReviewp56NoLogHeaderMemberFailedHereRefused(t *testing.T) {
	// The member fails the read of its log header, or (its header read
	// and torn) a read of the scan of its log area past the header.
	for _, fromHeader := range []bool{true, false} {
		rng := rand.New(rand.NewSource(5))
		tw := tornRaid5Write(t, rng, true, 0)
		sb := tw.sb
		for _, path := range tw.paths {
			writeFileAt(t, path, int64(sb.LogOffset)+200, []byte{0xff}) // (its checksum fails: torn)
		}
		logLo, logHi := int64(sb.LogOffset), int64(sb.LogOffset+sb.LogBytes)
		if !fromHeader {
			logLo++ // (the header read, at the area's start, succeeds)
		}
		spec := CreateSpec{Level: -1, OpenDevice: func(p string) (Device, error) {
			d, err := openFile(p)
			if err != nil || p != tw.paths[tw.d0] {
				return d, err
			}
			return offFailDev{Device: d, fail: func(int64) bool { return false }, failRead: func(off int64) bool { return off >= logLo && off < logHi }}, nil
		}}
		a, err := Open(tw.paths, spec, false)
		if err != nil {
			if !errors.Is(err, engine.ErrDirtyDegraded) {
				t.Fatalf("header read fails %v: refused with %v, want ErrDirtyDegraded", fromHeader, err)
			}
			continue // refused: right
		}
		a.StopSync()
		state := a.Engine.State().Members[tw.d0].State
		got := pReadOne(t, rng, a, tw.a0, tornHi-tornLo)
		warnings := a.Warnings
		a.Close()
		if !bytes.Equal(got, tw.old[tw.sm.Slot[tw.d0]]) {
			t.Fatalf("header read fails %v: dirty raid5 with no log header, member %d failed at assembly (now %v): the array started (warnings %q) and the rows of its chunk, which the torn write did not touch, read back wrong", fromHeader, tw.d0, state, warnings)
		}
		t.Fatalf("header read fails %v: dirty raid5 with no log header and member %d failed at assembly (now %v) started unforced (warnings %q)", fromHeader, tw.d0, state, warnings)
	}
}
