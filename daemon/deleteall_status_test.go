package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// del --all whose state file cannot be written failed for a reason that
// is the daemon's, not the arrays' state: its answer must not be a
// refusal (409, "unmount it first"-like) but an internal error (500), as
// `del -n N` answers the same failure. And an array that another del took
// meanwhile is not an error of this one.
func TestDeleteAllKeepsInternalErrors(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(notDir, "arrays.json") // its directory is a file
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.pending[1] = StateEntry{Number: 1, UUID: "u1", Members: []string{"/dev/x", "/dev/y"}}
	_, one := m.Delete(1)
	if one == nil {
		t.Fatal("del -n 1 with an unwritable state file succeeded")
	}
	m.pending[2] = StateEntry{Number: 2, UUID: "u2", Members: []string{"/dev/x", "/dev/y"}}
	m.pending[3] = StateEntry{Number: 3, UUID: "u3", Members: []string{"/dev/x", "/dev/y"}}
	_, all := m.DeleteAll()
	if all == nil {
		t.Fatal("del --all with an unwritable state file succeeded")
	}
	if got, want := statusOf(all), statusOf(one); got != want || got == http.StatusConflict {
		t.Errorf("del --all answered %d for the failure del -n answers %d (%v)", got, want, all)
	}
}
