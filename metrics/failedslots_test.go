package metrics

import (
	"strings"
	"testing"
)

// A failed role whose device is not open (failed before the array was
// last assembled, not removed) counts in ublkraid_disks{state="failed"},
// as detail counts it, with no member series.
func TestFailedSlotsCounted(t *testing.T) {
	got := scrape(t, SourceFunc(func() []ArrayStats {
		return []ArrayStats{{Device: "ublkb0", Level: "raid1", RaidDisks: 3, FailedSlots: 1,
			Members: []MemberStats{{Name: "nvme0n1", State: MemberActive}, {Name: "nvme1n1", State: MemberActive}}}}
	}))
	for _, line := range []string{
		`ublkraid_disks{device="ublkb0",state="failed"} 1`,
		`ublkraid_disks{device="ublkb0",state="active"} 2`,
		`ublkraid_degraded{device="ublkb0"} 1`,
	} {
		if !strings.Contains(got, "\n"+line+"\n") {
			t.Errorf("exposition lacks %q", line)
		}
	}
	if strings.Count(got, "ublkraid_member_state{") != 2*4 { // (one-hot over four states)
		t.Errorf("member series: %d, want those of the two open members", strings.Count(got, "ublkraid_member_state{"))
	}
}
