package daemon

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/metrics"
)

// An array of the state file that did not start (a member missing at
// boot: pending) is known but serves no I/O: metrics.ArrayInactive, what
// node_md_state{state="inactive"} says of an md array assembled without
// enough members. The Manager left it out of its snapshot, so the array
// vanished from /metrics: no ublkraid_* series at all, nothing for an
// alert to see.
func TestSnapshotPendingArrayInactive(t *testing.T) {
	m := NewManager(nil, ManagerOptions{})
	m.pending[3] = StateEntry{Number: 3, UUID: "u3", Name: "tank", Members: []string{"/dev/x", "/dev/y"}}
	var found *metrics.ArrayStats
	snap := m.Snapshot()
	for i := range snap {
		if snap[i].Device == "ublkb3" {
			found = &snap[i]
		}
	}
	if found == nil {
		t.Fatalf("snapshot %+v: the pending array ublkb3 is missing", snap)
	}
	if found.State != metrics.ArrayInactive || found.Name != "tank" {
		t.Fatalf("pending array exported as %+v, want state inactive, name tank", *found)
	}
}
