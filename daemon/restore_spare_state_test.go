package daemon

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Contract: while Restore starts the state file's arrays, every state file
// write lists every entry of the file (started, starting, not yet tried,
// or refused), so that a daemon dying at any point of Restore leaves a
// state file from which the next daemon starts the same arrays.
//
// The write that used to break it: a degraded array holding a spare
// activates it as its start begins (StartBackground), and the activation
// writes the state file from the served and pending arrays. The array
// being started was in neither (served only once restore returned), nor
// was any entry after it: a crash (kill -9, power cut) before Restore's
// own write, or a failure of that write, left a state file that had
// forgotten them, and the next daemon neither started them nor recovered
// their devices.
func TestRestoreStateFileWritesKeepEveryEntry(t *testing.T) {
	px := files(t, 3, 8<<20) // array X: px[0], px[1] raid1, px[2] spare
	x, err := array.Open(px[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, Spares: px[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	xu := x.Status().UUID
	if err := x.SetClean(true); err != nil {
		t.Fatal(err)
	}
	x.Close()
	// Role 1 fails while the spare is not there (assembled without it):
	// recorded faulty, the spare still in the role table. The next start
	// with the spare activates it at once.
	x, err = array.Open(px[:2], array.CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	failAndStop(t, x, 1)

	// Entry 1 comes after X in the file; its members are not there (yet),
	// so it stays pending: it must be in the state file all along too.
	dir := t.TempDir()
	state := filepath.Join(dir, "arrays.json")
	entries := []StateEntry{
		{Number: 0, UUID: xu, Members: slices.Clone(px)},
		{Number: 1, UUID: "00000000-0000-0000-0000-000000000001", Members: []string{filepath.Join(dir, "gone0"), filepath.Join(dir, "gone1")}},
	}
	if err := SaveState(state, State{Arrays: slices.Clone(entries)}); err != nil {
		t.Fatal(err)
	}
	savedCreate, savedWrite := createDevice, writeState
	t.Cleanup(func() { createDevice, writeState = savedCreate, savedWrite })
	createDevice = func(_ *ublk.Control, _ ublk.Target, cfg ublk.Config) (*ublk.Device, error) {
		return &ublk.Device{}, nil
	}
	var mu sync.Mutex
	var writes [][]int // the entries of each state file write, in order
	writeState = func(path string, st State) error {
		var ns []int
		for _, e := range st.Arrays {
			ns = append(ns, e.Number)
		}
		slices.Sort(ns)
		mu.Lock()
		writes = append(writes, ns)
		mu.Unlock()
		return SaveState(path, st)
	}

	m := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := m.Restore()
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	s := m.arrays[0]
	_, pending0 := m.pending[0]
	_, pending1 := m.pending[1]
	m.mu.Unlock()
	if s == nil {
		t.Fatalf("Restore: %d started, %d failed; array 0 not served", started, failed)
	}
	t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	if st := s.a.Status(); st.Members[1].Path != px[2] {
		t.Fatalf("the spare did not take role 1 at the start: %+v", st.Members)
	}
	if started != 1 || failed != 1 || pending0 || !pending1 {
		t.Errorf("Restore: %d started, %d failed, array 0 pending %v, array 1 pending %v; want 1, 1, false, true", started, failed, pending0, pending1)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writes) < 2 {
		t.Fatalf("state file writes %v: the spare activation's write is missing (the test no longer covers it)", writes)
	}
	for i, ns := range writes {
		if !slices.Equal(ns, []int{0, 1}) {
			t.Errorf("state file write %d of %d during Restore lists arrays %v; want [0 1]: a daemon dying now forgets the others", i+1, len(writes), ns)
		}
	}
}
