package daemon

import "testing"

// Found by review: an array of the state file that did not start (pending: a member it
// recorded active is absent) is the daemon's: metrics export it as
// ublkraid_state{state="inactive"} (TestSnapshotPendingArrayInactive),
// `del -n N` forgets it, add of its members is refused because the
// daemon "keeps it pending". `list` (GET /v1/arrays) leaves it out
// entirely, so an operator running `ublk-raid list` after a boot sees no
// trace of the array that failed to come up, while md's /proc/mdstat
// lists it ("md0 : inactive sdb[0](S)") and mdadm --detail describes it
// ("State : inactive"). It is listed now, inactive.
func TestListShowsPendingArray(t *testing.T) {
	m := NewManager(nil, ManagerOptions{})
	m.pending[3] = StateEntry{Number: 3, UUID: "u3", Name: "tank", Members: []string{"/dev/x", "/dev/y"}}
	for _, a := range m.List() {
		if a.Number == 3 {
			if a.State != "inactive" || a.Name != "tank" || len(a.Members) != 2 || a.Members[1].Path != "/dev/y" {
				t.Fatalf("the pending array listed as %+v", a)
			}
			return
		}
	}
	t.Fatalf("list %+v: the pending array /dev/ublkb3 (exported by /metrics as inactive) is missing", m.List())
}
