package daemon

import (
	"net/http"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// pendingMirror makes a stopped raid1 of two files and registers it as
// the Manager's pending state entry 3 (as after a restart where it did
// not start); it returns its member paths and uuid.
func pendingMirror(t *testing.T, m *Manager) ([]string, string) {
	t.Helper()
	p := files(t, 2, 8<<20)
	a, err := array.Open(p, array.CreateSpec{Name: "pending", Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	m.pending[3] = StateEntry{Number: 3, UUID: uuid, Members: p}
	return p, uuid
}

// servedMirrorTaken is servedMirror with the array opened as the Manager
// opens its arrays: asking it which arrays it keeps (Taken).
func servedMirrorTaken(t *testing.T, size int64) (*Manager, *array.Array, []string) {
	t.Helper()
	paths := files(t, 2, size)
	m := NewManager(nil, ManagerOptions{})
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true,
		Taken: func(uuid string, member *[16]byte) error { return m.taken(uuid, member, 0) }}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m.arrays[0] = &served{n: 0, a: a}
	return m, a, paths
}

// A member of an array the daemon keeps pending (its state entry, its
// number reserved, retried) is given to another array by add-spare or
// replace --with with --force: the daemon knows the device belongs to
// its pending array (as it does for add, where Taken refuses it, --force
// or not), yet overwrote it. Found by review: the array keeps Taken
// for its new devices (checkNewDevice).
func TestForceDoesNotTakePendingArrayMember(t *testing.T) {
	for _, op := range []string{"add-spare", "replace"} {
		t.Run(op, func(t *testing.T) {
			m, a0, p0 := servedMirrorTaken(t, 8<<20)
			pp, uuid := pendingMirror(t, m)
			before := hashes(t, pp...)
			body := map[string]any{"member": pp[0], "force": true}
			if op == "replace" {
				body = map[string]any{"member": "1", "with": pp[0], "force": true}
			}
			code, msg := post(t, m, "/arrays/0/"+op, body)
			a0.WaitSync()
			if code == http.StatusOK {
				t.Errorf("%s of %s, member of pending array %s (/dev/ublkb3), into array 0 with --force: accepted (%q); array 0: spares %v members %+v",
					op, pp[0], uuid, msg, a0.Spares(), a0.Status().Members)
			}
			sameHashes(t, "the pending array's members", before, hashes(t, pp...))
			_ = p0
		})
	}
}

// add --level 1 --force over a member of a pending array and a blank
// device: the members carry superblocks that make no one array, so Open
// creates a new array over them without asking Taken; the pending
// array's member is overwritten.
func TestCreateForceDoesNotTakePendingArrayMember(t *testing.T) {
	m := NewManager(nil, ManagerOptions{})
	pp, uuid := pendingMirror(t, m)
	blank := files(t, 1, 8<<20)[0]
	before := hashes(t, pp...)
	five := 5
	code, msg := post(t, m, "/arrays", AddRequest{Members: []string{pp[0], blank}, Level: "1", Number: &five, Force: true})
	if code == http.StatusOK {
		t.Errorf("add --level 1 --force %s (member of pending array %s) %s: accepted (%q)", pp[0], uuid, blank, msg)
	}
	sameHashes(t, "the pending array's members", before, hashes(t, pp...))
}
