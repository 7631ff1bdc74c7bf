package daemon

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (st). The name of a state entry is taken as it is: its
// length and its characters are never checked (LoadState, restore), and
// an entry that does not start is listed with it (pendingView: list,
// detail, and the metrics' inactive array). The API documents the name
// as "up to 32 bytes of UTF-8 text, no control characters" and add
// refuses any other; a hand-edited or damaged state file hands clients
// (and `ublk-raid list`'s one line per array, a terminal) a name of any
// size holding newlines and escape sequences. A field read from disk must
// be bounded: refused or ignored, with a log.
func TestReviewstPendingNameUnbounded(t *testing.T) {
	state := filepath.Join(t.TempDir(), "arrays.json")
	name := "tank\n/dev/ublkb7  raid1  1.00G  active  2/2  -  /dev/sda\x1b[2J" + strings.Repeat("x", 1<<20)
	missing := filepath.Join(t.TempDir(), "gone")
	if err := SaveState(state, State{Arrays: []StateEntry{{Number: 0, UUID: "8c0e5c3a-6b7e-4d4a-9d55-0f0c7a1e2b33",
		Name: name, Members: []string{missing}}}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	started, failed, err := m.Restore()
	if err != nil {
		t.Logf("Restore refused the state file: %v", err)
		return // refused: fine
	}
	if started != 0 || failed != 1 {
		t.Fatalf("Restore: %d started, %d failed (the test wants the entry pending)", started, failed)
	}
	for _, a := range m.List() {
		if len(a.Name) > engine.ArrayNameMax || checkText(a.Name) != nil {
			t.Errorf("list shows the pending %s with a name of %d bytes (%q...): the API's names are up to %d bytes of text without control characters", a.Device, len(a.Name), a.Name[:min(len(a.Name), 60)], engine.ArrayNameMax)
		}
	}
}
