package daemon

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A member operation still running when the daemon stops (Shutdown takes
// the arrays out to stop them, then waits for the operation) does not
// write the state file without them: the next daemon must find the
// arrays it leaves (kept devices to recover, or arrays to assemble at
// the next start, as md's mdadm.conf).
func TestShutdownDuringOperationKeepsStateFile(t *testing.T) {
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	var m *Manager
	shut := make(chan struct{})
	log := hookLog("member removed", func() {
		go func() {
			defer close(shut)
			m.Shutdown(true)
		}()
		// (until Shutdown has taken the arrays out and waits for the
		// operation lock)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			m.mu.Lock()
			n := len(m.arrays)
			m.mu.Unlock()
			if n == 0 {
				break
			}
		}
	})
	state := filepath.Join(t.TempDir(), "arrays.json")
	m = NewManager(nil, ManagerOptions{Log: log, StateFile: state})
	uuid := a.Status().UUID
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{UUID: uuid, Members: slices.Clone(paths)}}
	if err := m.saveState(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Remove(0, paths[1]); err != nil {
		t.Fatal(err)
	}
	<-shut
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || st.Arrays[0].UUID != uuid {
		t.Fatalf("state file after a shutdown during a remove: %+v (want array %s kept)", st.Arrays, uuid)
	}
}
