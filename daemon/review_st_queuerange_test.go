package daemon

import (
	"path/filepath"
	"slices"
	"testing"
)

// Found by review (st). A hand-edited state file whose entry holds a
// queue setting no daemon writes (depth 5000; add refuses more than 4096,
// 400) is accepted by LoadState, whose check bounds the device number
// only. Restore then assembles the array, writes its dirty mark, and only
// ublk.Create's Validate refuses the depth: the members' superblocks were
// rewritten for a start that could never succeed (and again every 2 s by
// the pending retries). A field out of range must be refused before any
// member is written (as add does), or by LoadState.
func TestReviewstStateQueueSettingsOutOfRange(t *testing.T) {
	paths, uuid := stoppedMirror(t, 8<<20)
	state := filepath.Join(t.TempDir(), "arrays.json")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: uuid, Members: slices.Clone(paths), Depth: 5000}}}); err != nil {
		t.Fatal(err)
	}
	before := hashes(t, paths...)
	// (No fakeDevices: ublk.Create's own Validate refuses the depth
	// before it touches the control device.)
	m := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := m.Restore()
	if s := m.arrays[0]; s != nil {
		t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	}
	t.Logf("Restore: %d started, %d failed, %v", started, failed, err)
	if started != 0 {
		t.Fatalf("an entry of depth 5000 started")
	}
	sameHashes(t, "a state entry of depth 5000 (out of range: add refuses it), which cannot start", before, hashes(t, paths...))
}
