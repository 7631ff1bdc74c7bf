package daemon

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// gatedDev blocks writes into [lo, hi) while armed (the write-hole log
// area a spare's activation resets before it puts the spare in its role).
type gatedDev struct {
	array.Device
	mu      sync.Mutex
	armed   bool
	lo, hi  int64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (d *gatedDev) wait(off int64) {
	d.mu.Lock()
	hit := d.armed && off >= d.lo && off < d.hi
	d.mu.Unlock()
	if hit {
		d.once.Do(func() { close(d.entered) })
		<-d.release
	}
}

func (d *gatedDev) WriteAt(p []byte, off int64) error {
	d.wait(off)
	return d.Device.WriteAt(p, off)
}

// opening is an OpenDevice that opens the device at path through d, and
// the others as they are.
func (d *gatedDev) opening(path string) func(string) (array.Device, error) {
	return func(p string) (array.Device, error) {
		m, err := ublk.OpenMember(p)
		switch {
		case err != nil:
			return nil, err
		case p != path:
			return m, nil
		}
		d.Device = m
		return d, nil
	}
}

func (d *gatedDev) WriteAtDurable(p []byte, off int64) error {
	d.wait(off)
	return d.Device.WriteAtDurable(p, off)
}

// A spare being activated (out of the array's spares, not yet in its
// role: activateSpare between a.spares = a.spares[1:] and addOpen's
// Members[role] = m, which resets the write-hole log area first) is
// listed in the state entry and held "neither in a role nor as a spare":
// listedUnheld takes it for a device already let go, drops it from the
// state file and answers success. The spare then takes the role: the
// user was told the device is out of the array while it is being rebuilt
// into it. (Before ea1c941 this remove answered 404.) Found by review;
// the spare being activated is held (Status.Activating).
func TestRemoveOfSpareBeingActivatedRefused(t *testing.T) {
	paths := files(t, 4, 32<<20)
	g := &gatedDev{entered: make(chan struct{}), release: make(chan struct{})}
	open := g.opening(paths[3])
	a, err := array.Open(paths[:3], array.CreateSpec{Level: engine.Level5, ChunkSectors: 128, NoBitmap: true, AssumeClean: true,
		Spares: paths[3:], OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	sb := a.SBs[0]
	if sb.LogBytes == 0 {
		t.Fatal("no write-hole log area")
	}
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 0, UUID: a.Status().UUID, Members: slices.Clone(paths)}}
	if err := m.saveState(); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.armed, g.lo, g.hi = true, int64(sb.LogOffset), int64(sb.LogOffset+sb.LogBytes)
	g.mu.Unlock()
	if err := a.Fail(1); err != nil { // the spare's activation starts (go a.activateSpare)
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the spare's activation did not start")
	}
	v, rerr := m.Remove(0, paths[3])
	close(g.release)
	deadline := time.Now().Add(10 * time.Second)
	for a.RoleOf(paths[3]) != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	a.WaitSync()
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if r := a.RoleOf(paths[3]); rerr == nil && r >= 0 {
		t.Errorf("remove %s answered success (state %s), yet the device now holds role %d of the array; state file members %v",
			paths[3], v.State, r, st.Arrays[0].Members)
	}
}
