package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/ublk"
)

// An add whose device the driver refuses (no memory, its device limit)
// is a refused command: the members are left as they were, not holding
// the new array it had written before asking for the device.
func TestAddRefusedDeviceLeavesMembers(t *testing.T) {
	paths := files(t, 3, 16<<20)
	before := hashes(t, paths...)
	saved := createDevice
	t.Cleanup(func() { createDevice = saved })
	createDevice = func(*ublk.Control, ublk.Target, ublk.Config) (*ublk.Device, error) {
		return nil, errors.New("no memory")
	}
	m := NewManager(nil, ManagerOptions{})
	zero := 0
	_, err := m.Add(t.Context(), AddRequest{Members: paths[:2], Spares: paths[2:], Level: "1", Number: &zero})
	if err == nil {
		t.Fatal("add succeeded with the device refused")
	}
	if !strings.Contains(err.Error(), "as they were") {
		t.Errorf("refused add: %v; want it to say the members are as they were", err)
	}
	sameHashes(t, "add refused by the driver", before, hashes(t, paths...))
	// And nothing holds them: the same add, once the driver takes it,
	// creates the array.
	createDevice = func(*ublk.Control, ublk.Target, ublk.Config) (*ublk.Device, error) {
		return nil, errors.New("no memory again")
	}
	if _, err := m.Add(t.Context(), AddRequest{Members: paths[:2], Level: "1", Number: &zero}); err == nil || !strings.Contains(err.Error(), "again") {
		t.Fatalf("second add: %v; want the driver's refusal again (the members free)", err)
	}
}
