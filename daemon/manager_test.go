package daemon

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// The Manager's answers that need no kernel: validation, unknown arrays,
// and pending state entries (arrays of the state file that did not start).
func TestManagerWithoutDevices(t *testing.T) {
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.pending[3] = StateEntry{Number: 3, UUID: "u3", Members: []string{"/dev/x", "/dev/y"}}
	status := func(err error) int {
		if err == nil {
			return http.StatusOK
		}
		return statusOf(err)
	}
	three := 3
	for _, tc := range []struct {
		name   string
		call   func() error
		status int
		msg    string
	}{
		{"add bad level", func() error {
			_, err := m.Add(context.Background(), AddRequest{Level: "7", Members: []string{"/dev/a"}})
			return err
		}, 400, `level "7"`},
		{"add on a pending number", func() error {
			_, err := m.Add(context.Background(), AddRequest{Level: "1", Members: []string{"/dev/a", "/dev/b"}, Number: &three})
			return err
		}, 409, "reserved for array u3"},
		{"detail unknown", func() error { _, err := m.Detail(1); return err }, 404, "/dev/ublkb1: no such array"},
		{"fail unknown", func() error { _, err := m.Fail(1, "/dev/x"); return err }, 404, "no such array"},
		{"remove unknown", func() error { _, err := m.Remove(1, "0"); return err }, 404, "no such array"},
		{"re-add unknown", func() error { _, err := m.ReAdd(1, "/dev/x"); return err }, 404, "no such array"},
		{"check unknown", func() error { _, err := m.Check(1); return err }, 404, "no such array"},
		{"delete unknown", func() error { _, err := m.Delete(1); return err }, 404, "no such array"},
	} {
		err := tc.call()
		if status(err) != tc.status || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v (status %d); want %d and %q", tc.name, err, status(err), tc.status, tc.msg)
		}
	}
	if d, err := m.Detail(3); err != nil || d.State != "inactive" || d.Sync.Action != "idle" {
		t.Fatalf("detail of the pending array: %+v %v, want it inactive", d, err)
	}
	if l := m.List(); len(l) != 1 || l[0].Number != 3 || l[0].State != "inactive" {
		t.Fatalf("list (the pending array, inactive): %+v", l)
	}
	res, err := m.Delete(3)
	if err != nil || len(res.Forgotten) != 1 || res.Forgotten[0] != 3 {
		t.Fatalf("delete of a pending entry: %+v %v", res, err)
	}
	st, err := LoadState(state)
	if err != nil || len(st.Arrays) != 0 {
		t.Fatalf("state after forgetting: %+v %v", st, err)
	}
	m.Shutdown(false)
	if _, err := m.Add(context.Background(), AddRequest{Level: "1", Members: []string{"/dev/a", "/dev/b"}}); err == nil || statusOf(err) != 409 {
		t.Fatalf("add after shutdown: %v", err)
	}
}
