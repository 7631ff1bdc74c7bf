package daemon

import (
	"net/http"
	"strings"
	"testing"
)

// Found by review. `fail -n N DEV` of a spare the array lists (detail: "-  spare  DEV")
// answers "DEV is not a member of /dev/ublkbN" (404): wrong about the
// device, which is the array's spare, and the README's sequence
// (`fail -n 0 DEV && remove -n 0 DEV`) stops at its first step. md marks
// a spare faulty on --fail (then --remove takes it); at the least the
// refusal must say what DEV is (a spare: remove it).
func TestReviewCliFailSpareSaysSpare(t *testing.T) {
	const size = 8 << 20
	m, a, paths := servedMirror(t, size)
	sp := files(t, 1, size)[0]
	if err := a.AddSpare(sp); err != nil {
		t.Fatal(err)
	}
	if got := a.Spares(); len(got) != 1 || got[0] != sp {
		t.Fatalf("spares %v", got)
	}
	before := hashes(t, append(paths, sp)...)
	code, msg := post(t, m, "/arrays/0/fail", map[string]string{"member": sp})
	t.Logf("fail of the spare: %d %q", code, msg)
	sameHashes(t, "fail of a spare", before, hashes(t, append(paths, sp)...))
	if code == http.StatusOK {
		return // (md's behaviour: marked faulty)
	}
	if strings.Contains(msg, "not a member") || !strings.Contains(msg, "spare") {
		t.Errorf("fail of spare %s: %d %q: says the array's spare is not its member, and not that it is a spare", sp, code, msg)
	}
}
