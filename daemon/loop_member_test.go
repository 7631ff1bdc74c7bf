package daemon

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review: nothing stopped an array's own block device from being
// given as its spare (or replacement, or re-added member): its member I/O
// would go through the array itself and its queues wait on themselves.
// md refuses such a loop (the block layer's holder links). Refused now,
// before the state file or any device is touched.
func TestOwnDeviceRefusedAsMember(t *testing.T) {
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m := NewManager(nil, ManagerOptions{})
	own := DevicePath(5)
	m.arrays[5] = &served{n: 5, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 5, UUID: a.Status().UUID, Members: paths}}
	for name, call := range map[string]func() error{
		"add-spare": func() error { _, err := m.AddSpare(5, []string{own}, true); return err },
		"replace":   func() error { _, err := m.Replace(5, "1", own, true); return err },
		"re-add":    func() error { _, err := m.ReAdd(5, own); return err },
	} {
		err := call()
		if err == nil || statusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "the array's own device") {
			t.Errorf("%s of the array's own device: %v (status %d), want a refusal (409) saying so", name, err, statusOf(err))
		}
	}
	if st := a.Status(); st.Members[1].Path != paths[1] || st.Members[1].State != "active" {
		t.Errorf("after the refusals: role 1 %+v", st.Members[1])
	}
}
