package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// TestReviewReaddAliasSparesOneCall: one add-spare naming the same
// storage twice (two nodes of one disk, as TestHeldSpareRefusedUnderAnotherNode)
// checks both names before writing either, so neither is "held" yet: both
// become spares over one storage (the second superblock overwrites the
// first). Two failures later activate both into two roles, each rebuilt
// over the other. Across two calls this is refused (Array.heldAs). Found
// by review; one call now refuses it too (Array.distinctSpares).
func TestReviewReaddAliasSparesOneCall(t *testing.T) {
	open := aliasOpen(9, []string{"/m0", "/m1", "/m2", "/s0"}, "/s0")
	a, err := Open([]string{"/m0", "/m1", "/m2"}, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true,
		OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = a.AddSpares([]string{"/s0", "/dev/alias-of-s0"}, false)
	if err == nil {
		// What it leads to: two failures put the one storage in two roles.
		spares := a.Spares()
		for _, r := range []int{1, 2} {
			if err := a.Fail(r); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the spare's rebuild", func() bool { return a.Status().Members[r].State == "active" })
			a.WaitSync()
		}
		st := a.Status()
		t.Fatalf("add-spare of /s0 and another node of the same storage in one call: accepted (spares %v); after two failures one storage holds roles 1 (%s, %s) and 2 (%s, %s)",
			spares, st.Members[1].Path, st.Members[1].State, st.Members[2].Path, st.Members[2].State)
	}
	t.Logf("refused: %v", err)
}
