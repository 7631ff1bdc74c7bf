package daemon

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review: a raid5/6 add whose ublk settings (--max-io, --queues)
// the write-hole log area cannot hold passes every check of the request
// and of the members, the new array's superblocks and log areas are
// written (array.Open), and only then is it refused: the device's first
// queue (Array.NewQueue -> parityLogRing) finds each queue's ring smaller
// than one write's entries. With --max-io 32M a raid6 can never be served
// (one write's entries are larger than the whole log area), whatever the
// queue count. "Validate, then change": a refused add must leave the
// members as they were.
//
// createDevice is stubbed with what the driver does first with the
// target (SetQueueCount, then NewQueue per queue, whose ring check is
// replayed here from the array's exported geometry and superblock: a
// queue's ring is (LogBytes - 4096) / queues, whole pages, and it must
// hold ParityLogBytesPerRequest(max IO)). Such an add is now refused
// before array.Open writes anything (CreateSpec.Queues, MaxIOBytes).
func TestReviewHoleAddLogRingTooSmallWritesMembers(t *testing.T) {
	cases := []struct {
		name          string
		memberBytes   int64
		queues, maxIO int
	}{
		// Every setting at its default on a machine of 8 CPUs or more
		// (ublk's default queue count is min(CPUs, 8)): a raid6 of five
		// 32 MiB members gets an 8 MiB log area, 1 MiB a queue, and a
		// 512 KiB write's entries need 1072 KiB.
		{"defaults, 8 queues, 32M members", 32 << 20, 8, 0},
		// --max-io 32M: one write's entries (24 MiB) exceed the whole
		// 16 MiB area: never servable, even with one queue.
		{"one queue, max-io 32M", 64 << 20, 1, 32 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			paths := files(t, 5, c.memberBytes)
			before := hashes(t, paths...)
			saved := createDevice
			t.Cleanup(func() { createDevice = saved })
			var ringErr error
			createDevice = func(_ *ublk.Control, tgt ublk.Target, cfg ublk.Config) (*ublk.Device, error) {
				a := tgt.(*array.Array)
				queues, maxIO := cfg.Queues, cfg.MaxIOBytes
				if queues == 0 {
					queues = 1
				}
				if maxIO == 0 {
					maxIO = ublk.DefaultMaxIOBytes
				}
				if err := a.SetQueueCount(queues); err != nil {
					return nil, err
				}
				need := a.Engine.Parity.ParityLogBytesPerRequest(maxIO)
				size := (a.SBs[0].LogBytes - engine.ParityLogHeaderSize) / uint64(queues) &^ 4095
				if size < uint64(need) {
					ringErr = fmt.Errorf("array: the write-hole log area (%d bytes) is too small for %d queues: each needs %d bytes for writes of %d bytes",
						a.SBs[0].LogBytes, queues, need, maxIO)
					return nil, ringErr
				}
				return nil, errors.New("stub: no ublk driver")
			}
			m := NewManager(nil, ManagerOptions{})
			zero := 0
			code, msg := post(t, m, "/arrays", AddRequest{Members: paths, Level: "6", Number: &zero, Queues: c.queues, MaxIOBytes: c.maxIO})
			if code/100 == 2 {
				t.Fatalf("add accepted: %d %s", code, msg)
			}
			if ringErr == nil && !strings.Contains(msg, "write-hole log area") {
				t.Fatalf("refused (%d %s) before the device, not for the log ring: not the case under test", code, msg)
			}
			t.Logf("refused: %d %s", code, msg)
			after := hashes(t, paths...)
			changed := 0
			for p, h := range before {
				if after[p] != h {
					changed++
				}
			}
			if changed != 0 {
				t.Errorf("add --level 6 (%s) was refused only when the device started (%v), after writing %d of the %d members (the new array's superblocks and write-hole log areas): it should be refused, or the log area sized for it, before anything is written",
					c.name, ringErr, changed, len(paths))
			}
		})
	}
}
