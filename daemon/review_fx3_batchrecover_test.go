package daemon

import (
	"errors"
	"slices"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review (fx3). serve --batch-io on a driver without
// UBLK_F_BATCH_IO takes the option for "devices the daemon creates;
// recovered ones keep theirs" (QueueOptions.BatchIO, the serve flag's
// help): a restart re-attaches the live devices an earlier server made
// without it (Recover serves the device's own flags). restore now asks
// ublk.CheckFeatures(feats, cfg) of every entry, re-attached or not, so
// cfg.BatchIO refuses the re-attach (ErrNoBatchIO) before the assembly:
// the array stays pending and the live device's users wait for good,
// where the code before started it.
func TestReviewfx3RestoreRecoverIgnoresBatchIOOption(t *testing.T) {
	paths, uuid := stoppedMirror(t, 8<<20)
	savedFeats, savedInfo := driverFeatures, devInfo
	t.Cleanup(func() { driverFeatures, devInfo = savedFeats, savedInfo })
	driverFeatures = func(*ublk.Control) (uint64, error) { return ^uint64(ublk.FlagBatchIO), nil }
	// A live device made by this daemon (without batched I/O), whose
	// server died: what a restart re-attaches.
	devInfo = func(_ *ublk.Control, id uint32) (ublk.DevInfo, error) {
		return ublk.DevInfo{NrHwQueues: 1, QueueDepth: 128, State: ublk.StateQuiesced, MaxIOBufBytes: 1 << 20, DevID: id,
			Flags: ublk.FlagCmdIoctlEncode | ublk.FlagUserRecovery | ublk.FlagUserRecoveryReissue}, nil
	}
	m := NewManager(nil, ManagerOptions{Queue: QueueOptions{BatchIO: true}})
	reached := errors.New("assembly reached")
	opened := false
	_, err := m.restore(StateEntry{Number: 0, UUID: uuid, Members: slices.Clone(paths), Queues: 1, Depth: 128, MaxIOBytes: 1 << 20},
		func([]string, array.CreateSpec) (*array.Array, error) { opened = true; return nil, reached })
	if !opened || !errors.Is(err, reached) {
		t.Fatalf("restore of a live device made without batched I/O, under serve --batch-io on a driver without it: %v (assembly reached: %v); want the re-attach to go ahead (recovered devices keep their own features)", err, opened)
	}
}
