package daemon

import (
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by reviewing ca3e4d5: loopsBack refused an array's own device and the device of an
// array that holds it directly, but not one whose array holds it through
// another: array 5 given /dev/ublkb6 as a spare, where array 6 holds
// /dev/ublkb7 and array 7 holds /dev/ublkb5, closes the loop
// 5 -> 6 -> 7 -> 5 just the same: 5's member I/O ends up queued behind
// 5's own queues.
func TestLoopThroughTwoArraysRefused(t *testing.T) {
	rack := memdev.NewRack(rand.New(rand.NewPCG(1, 2)))
	for _, p := range []string{"/r5/a", "/r5/b", "/r6/b", "/r7/b", "/dev/ublkb5", "/dev/ublkb6", "/dev/ublkb7"} {
		rack.AddDisk(p, 8<<20)
	}
	open := rack.Opener()
	spec := array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true,
		OpenDevice: func(p string) (array.Device, error) { return open(p) }}
	arrays := map[int]*served{}
	mk := func(n int, members []string) {
		a, err := array.Open(members, spec, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		m := members
		srv := &served{n: n, a: a, d: &ublk.Device{}, entry: StateEntry{Number: n, UUID: a.Status().UUID, Members: m}}
		arrays[n] = srv
	}
	mk(5, []string{"/r5/a", "/r5/b"})
	mk(6, []string{"/dev/ublkb7", "/r6/b"})
	mk(7, []string{"/dev/ublkb5", "/r7/b"})
	m := NewManager(nil, ManagerOptions{})
	for n, s := range arrays {
		m.arrays[n] = s
	}
	// (direct holder: refused, as ca3e4d5 tests)
	if err := m.loopsBack(5, "/dev/ublkb7"); err == nil {
		t.Errorf("array 7 holds /dev/ublkb5 directly: /dev/ublkb7 not refused for array 5")
	}
	_, err := m.AddSpare(5, []string{"/dev/ublkb6"}, true)
	if err == nil || statusOf(err) != http.StatusConflict {
		t.Fatalf("add-spare /dev/ublkb6 to array 5 (6 holds /dev/ublkb7, 7 holds /dev/ublkb5): %v (status %d), want a refusal: a loop 5 -> 6 -> 7 -> 5", err, statusOf(err))
	}
}
