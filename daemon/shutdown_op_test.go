package daemon

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review: a member operation under way when Shutdown starts
// finishes (Shutdown waits for its lock), but its state file write was
// skipped silently (saveState returned nil once m.stopping was set): the
// operation answered a plain success, and the state file the next daemon
// reads did not record it. The array's superblocks named the new member in
// role 1, the state file the old one only. The state file is now written
// from the arrays Shutdown took.
func TestReplaceDuringShutdownRecordedInState(t *testing.T) {
	paths, g, a, m, state, _ := gatedMirror(t, 2)
	g.mu.Lock()
	g.armed, g.lo, g.hi = true, 0, math.MaxInt64
	g.mu.Unlock()

	done := make(chan replaceResult, 1)
	go func() {
		v, err := m.Replace(0, "1", paths[2], false)
		done <- replaceResult{v, err}
	}()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("replace did not write the new device")
	}
	r := shutdownDuring(t, m, g, done)
	if r.err != nil {
		t.Skipf("replace refused: %v", r.err)
	}
	a.WaitSync()
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	members := st.Arrays[0].Members
	if a.RoleOf(paths[2]) == 1 && !slices.Contains(members, paths[2]) {
		t.Errorf("replace answered success (warnings %q) and role 1 is held by %s, but the state file the next daemon reads lists %v",
			r.v.Warnings, paths[2], members)
	}
	t.Logf("state file entry: members %v joining %v", members, st.Arrays[0].Joining)
	// What the next daemon does with it (keep: the device is left for it).
	a.Close()
	fakeDevices(t)
	m2 := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := m2.Restore()
	if err != nil || started != 1 || failed != 0 {
		t.Errorf("the next daemon, from the state file: started %d failed %d err %v", started, failed, err)
	} else {
		t.Logf("restart: %+v", m2.arrays[0].a.Status().Members)
		m2.arrays[0].a.Close()
	}
}

// Found by review: as above, with Shutdown begun before the replace's
// "joining" write (the replace waited for the array's lock, held by a
// superblock write of the array): neither the joining mark nor the result
// reached the state file, the replace answered a plain success, and the
// next daemon refused the array (role 1 active on a device no entry names).
func TestReplaceDuringShutdownRestartStarts(t *testing.T) {
	paths, g, a, m, state, s := gatedMirror(t, 0)
	g.mu.Lock()
	g.armed, g.lo, g.hi = true, engine.SuperblockOffset, engine.SuperblockOffset+engine.SuperblockSize
	g.mu.Unlock()
	go a.SetClean(false) // a superblock write, under the array's lock
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no superblock write")
	}
	done := make(chan replaceResult, 1)
	go func() {
		v, err := m.Replace(0, "1", paths[2], false)
		done <- replaceResult{v, err}
	}()
	// The replace holds the operation lock (and waits for the array's).
	for deadline := time.Now().Add(5 * time.Second); ; {
		if s.opMu.TryLock() {
			s.opMu.Unlock()
		} else {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replace did not take the operation lock")
		}
		time.Sleep(time.Millisecond)
	}
	r := shutdownDuring(t, m, g, done)
	if r.err != nil {
		t.Skipf("replace refused: %v", r.err)
	}
	a.WaitSync()
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	e := st.Arrays[0]
	t.Logf("replace answered success, warnings %q; role 1 on %s; state file members %v joining %v", r.v.Warnings, a.Status().Members[1].Path, e.Members, e.Joining)
	a.Close() // keep: the next daemon takes the device over
	fakeDevices(t)
	m2 := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := m2.Restore()
	if err != nil || started != 1 || failed != 0 {
		t.Errorf("replace answered success without a warning, yet the next daemon, from the state file, does not start the array: started %d failed %d err %v", started, failed, err)
	}
	if s2 := m2.arrays[0]; s2 != nil {
		s2.a.Close()
	}
}

type replaceResult struct {
	v   Array
	err error
}

// gatedMirror is a raid1 of paths[0] and paths[1] (three files: paths[2]
// is free) served by a Manager with a state file, the device of
// paths[gated] opened through g (disarmed).
func gatedMirror(t *testing.T, gated int) (paths []string, g *gatedDev, a *array.Array, m *Manager, state string, s *served) {
	t.Helper()
	paths = files(t, 3, 8<<20)
	g = &gatedDev{entered: make(chan struct{}), release: make(chan struct{})}
	open := g.opening(paths[gated])
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	state = filepath.Join(t.TempDir(), "arrays.json")
	m = NewManager(nil, ManagerOptions{StateFile: state})
	s = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 0, UUID: a.Status().UUID, Members: slices.Clone(paths[:2])}}
	m.arrays[0] = s
	if err := m.saveState(); err != nil {
		t.Fatal(err)
	}
	return paths, g, a, m, state, s
}

// shutdownDuring starts m's Shutdown, and once it has begun releases g,
// on which the replace answering on done waits; it returns the replace's
// answer after both ended.
func shutdownDuring(t *testing.T, m *Manager, g *gatedDev, done chan replaceResult) replaceResult {
	t.Helper()
	shut := make(chan struct{})
	go func() { m.Shutdown(true); close(shut) }()
	for deadline := time.Now().Add(5 * time.Second); ; {
		m.mu.Lock()
		st := m.stopping
		m.mu.Unlock()
		if st {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Shutdown did not start")
		}
		time.Sleep(time.Millisecond)
	}
	g.mu.Lock()
	g.armed = false
	g.mu.Unlock()
	close(g.release)
	var r replaceResult
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("replace hung")
	}
	select {
	case <-shut:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown hung")
	}
	return r
}
