package daemon

import (
	"net/http"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// An array of the state file that did not start (pending: its number
// stays reserved for it, and it is retried) is not assembled again by
// `add` at another number, and nothing is written: otherwise the state
// file held two entries for one array, the pending retries spun on
// members held by the other (10 s each, under addMu), and the number the
// array got after a restart depended on entry order. mdadm refuses to
// assemble an array already known under another name.
func TestAddOfPendingArrayRefused(t *testing.T) {
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	m := NewManager(nil, ManagerOptions{})
	m.pending[3] = StateEntry{Number: 3, UUID: uuid, Members: paths}
	before := hashes(t, paths...)
	five := 5
	code, msg := post(t, m, "/arrays", AddRequest{Members: paths, Number: &five})
	if code == http.StatusOK {
		t.Errorf("assembling array %s, pending as /dev/ublkb3, as /dev/ublkb5: accepted (%q)", uuid, msg)
	}
	sameHashes(t, "the pending array's members", before, hashes(t, paths...))
}

// A member failed and removed from a served raid1 (closed, so no lock
// stops it) is not assembled by `add --force` as a second, degraded copy
// of the same array at another number (two devices serving diverging
// copies of one array). mdadm --assemble refuses, --force or not ("Found
// some drive for an array that is already active").
func TestAssembleRemovedMemberOfServedArrayRefused(t *testing.T) {
	const size = 8 << 20
	m, a0, p0 := servedMirror(t, size)
	if err := a0.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a0.Remove(1); err != nil {
		t.Fatal(err)
	}
	before := hashes(t, p0...)
	five := 5
	code, msg := post(t, m, "/arrays", AddRequest{Members: p0[1:], Number: &five, Force: true})
	if code == http.StatusOK {
		t.Errorf("assembling %s, removed from served array 0 (uuid %s), as array 5: accepted (%q)", p0[1], a0.Status().UUID, msg)
	}
	sameHashes(t, "array 0's members", before, hashes(t, p0...))
}

// As above without --force: array 0 was assembled (`add p0`) while its
// other member p1 was not there (its own superblock still says active,
// as after a disk that dropped out without its failure reaching it); p1
// appears later: `add p1` must not assemble it as a second, diverging,
// degraded copy of the same array at another number, nor write to it.
func TestAssembleAbsentMemberOfServedArrayRefused(t *testing.T) {
	const size = 8 << 20
	p := files(t, 2, size)
	a, err := array.Open(p, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	a0, err := array.Open(p[:1], array.CreateSpec{}, false)
	if err != nil {
		t.Skipf("degraded assembly of one member refused: %v", err)
	}
	t.Cleanup(a0.Close)
	if err := a0.SetClean(false); err != nil { // as m.start
		t.Fatal(err)
	}
	m, _ := serving(a0, StateEntry{Members: p[:1]})
	before := hashes(t, p...)
	five := 5
	code, msg := post(t, m, "/arrays", AddRequest{Members: p[1:], Number: &five})
	if code == http.StatusOK {
		t.Errorf("assembling %s, a member of served array 0 (uuid %s), as array 5: accepted (%q)", p[1], a0.Status().UUID, msg)
	}
	sameHashes(t, "array 0's members", before, hashes(t, p...))
}
