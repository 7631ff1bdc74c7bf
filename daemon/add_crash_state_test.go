package daemon

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/ublk-raid/ublk-raid/ublk"
)

// A daemon dying as add creates the device (after the kernel has it,
// before the state file write that followed) left a device no state file
// named: served by nobody, its number taken until a reboot, while the
// members held the new array. The array is now in the state file before
// its device exists, so the next daemon recovers the device (or creates
// it, if it never was).
func TestAddRecordsArrayBeforeCreatingDevice(t *testing.T) {
	paths := files(t, 2, 8<<20)
	state := filepath.Join(t.TempDir(), "arrays.json")
	saved := createDevice
	t.Cleanup(func() { createDevice = saved })
	var atCreate State
	var loadErr error
	createDevice = func(_ *ublk.Control, _ ublk.Target, cfg ublk.Config) (*ublk.Device, error) {
		atCreate, loadErr = LoadState(state) // what a daemon dying now leaves
		return &ublk.Device{}, nil
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	zero := 0
	v, err := m.Add(t.Context(), AddRequest{Members: paths, Level: "1", Number: &zero, NoBitmap: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.mu.Lock(); s := m.arrays[0]; m.mu.Unlock(); s.a.StopSync(); s.a.Close() })
	if loadErr != nil {
		t.Fatalf("state file when the device was created: %v", loadErr)
	}
	if len(atCreate.Arrays) != 1 || atCreate.Arrays[0].Number != 0 || atCreate.Arrays[0].UUID != v.UUID || len(atCreate.Arrays[0].Members) != 2 {
		t.Fatalf("state file when the device was created: %+v; want array 0 (%s) with its 2 members", atCreate.Arrays, v.UUID)
	}
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || st.Arrays[0].Number != 0 || st.Arrays[0].UUID != v.UUID {
		t.Fatalf("state file after add: %+v; want array 0 (%s) only", st.Arrays, v.UUID)
	}
}

// A device the driver refused leaves no entry behind (the record made
// before creating it is dropped).
func TestAddRefusedDeviceLeavesNoEntry(t *testing.T) {
	paths := files(t, 2, 8<<20)
	state := filepath.Join(t.TempDir(), "arrays.json")
	saved := createDevice
	t.Cleanup(func() { createDevice = saved })
	createDevice = func(*ublk.Control, ublk.Target, ublk.Config) (*ublk.Device, error) {
		return nil, errors.New("no memory")
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	zero := 0
	if _, err := m.Add(t.Context(), AddRequest{Members: paths, Level: "1", Number: &zero, NoBitmap: true}); err == nil {
		t.Fatal("add succeeded with the device refused")
	}
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	pending := len(m.pending)
	m.mu.Unlock()
	if len(st.Arrays) != 0 || pending != 0 {
		t.Fatalf("after a refused device: state file %+v, %d pending; want none", st.Arrays, pending)
	}
}
