package daemon

import (
	"net/http"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// A device an array of the same daemon holds (here a file: O_EXCL is for
// block devices; files are locked) is not given to another array, not
// even with --force.
func TestMemberOfOtherServedArrayRefused(t *testing.T) {
	const size = 8 << 20
	for _, op := range []string{"add-spare", "replace"} {
		t.Run(op, func(t *testing.T) {
			m, _, p0 := servedMirror(t, size)
			p1 := files(t, 2, size)
			a1, err := array.Open(p1, array.CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a1.Close)
			m.arrays[1] = &served{n: 1, a: a1}
			before := hashes(t, p0...)
			body := map[string]any{"member": p0[1], "force": true}
			if op == "replace" {
				body = map[string]any{"member": "1", "with": p0[1], "force": true}
			}
			code, msg := post(t, m, "/arrays/1/"+op, body)
			a1.WaitSync()
			if code == http.StatusOK {
				t.Errorf("%s of array 0's active member %s into array 1 with --force: accepted (%q); array 1 now: spares %v role1 %s",
					op, p0[1], msg, a1.Spares(), a1.Status().Members[1].Path)
			}
			sameHashes(t, "array 0's member", before, hashes(t, p0...))
		})
	}
}

// Assembling, as a second array of the same daemon, the members a served
// array holds (files) is refused, and nothing is written to them.
func TestAssembleMembersOfServedArrayRefused(t *testing.T) {
	const size = 8 << 20
	m, _, p0 := servedMirror(t, size)
	before := hashes(t, p0...)
	five := 5
	code, msg := post(t, m, "/arrays", AddRequest{Members: p0, Number: &five})
	if code == http.StatusOK {
		t.Errorf("assembling array 0's members again as array 5: accepted (%q)", msg)
	}
	sameHashes(t, "array 0's members", before, hashes(t, p0...))
}
