package daemon

import (
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// sbFailDev fails superblock writes while armed.
type sbFailDev struct {
	array.Device
	armed atomic.Bool
}

func (d *sbFailDev) fails(off int64) error {
	if d.armed.Load() && off == engine.SuperblockOffset {
		return errors.New("write: I/O error")
	}
	return nil
}

func (d *sbFailDev) WriteAt(p []byte, off int64) error {
	if err := d.fails(off); err != nil {
		return err
	}
	return d.Device.WriteAt(p, off)
}

func (d *sbFailDev) WriteAtDurable(p []byte, off int64) error {
	if err := d.fails(off); err != nil {
		return err
	}
	return d.Device.WriteAtDurable(p, off)
}

// A spare whose superblock write fails is dropped by the array (it no
// longer takes the generations the members take); the daemon drops it
// from the state file too, so that a restart does not take it back as a
// spare holding an older generation.
func TestSpareDroppedLeavesStateFile(t *testing.T) {
	fakeDevices(t)
	paths := files(t, 4, 16<<20)
	d := &sbFailDev{}
	open := func(p string) (array.Device, error) {
		m, err := ublk.OpenMember(p)
		if err != nil || p != paths[3] {
			return m, err
		}
		d.Device = m
		return d, nil
	}
	a, err := array.Open(paths[:3], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true,
		Spares: paths[3:], OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	s, err := m.start(a, 0, m.config(0, 1, 32, 128<<10), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m.mu.Lock()
	m.arrays[0] = s
	m.mu.Unlock()
	if err := m.saveState(); err != nil {
		t.Fatal(err)
	}
	if st, err := LoadState(state); err != nil || !slices.Equal(st.Arrays[0].Members, paths) {
		t.Fatalf("state before: %+v, %v", st, err)
	}
	d.armed.Store(true)
	if err := a.SetClean(true); err != nil {
		t.Fatalf("the update failed with the spare's superblock write: %v", err)
	}
	if sp := a.Spares(); len(sp) != 0 {
		t.Fatalf("spares after the spare's superblock write failed: %v", sp)
	}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st, err := LoadState(state)
		if err != nil {
			t.Fatal(err)
		}
		if got = st.Arrays[0].Members; slices.Equal(got, paths[:3]) {
			return
		}
	}
	t.Fatalf("state file members after the spare was dropped: %v, want %v", got, paths[:3])
}
