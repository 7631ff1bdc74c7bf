package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// After a restart a failed member is not held (assembly leaves it closed)
// but the state file still lists it. Replacing its role (by number) must
// drop its path from the state file, as removing the role does: the
// array no longer needs that device, nothing else can drop the path
// afterwards (the role is held again), and a new disk later put in at
// that path (no superblock of the array) would keep the array from
// starting at the next restart.
func TestReplaceUnheldFailedRoleDropsItFromState(t *testing.T) {
	paths := files(t, 3, 8<<20)
	stoppedWithFailedRole1(t, paths[:2], array.CreateSpec{NoBitmap: true, AssumeClean: true})
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	b, err := array.Open(paths[:2], array.CreateSpec{}, false) // the restart
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if st := b.Status(); st.Members[1].Path != "" || st.Members[1].State != "faulty" {
		t.Fatalf("after the restart: %+v", st.Members)
	}
	m.arrays[0] = &served{n: 0, a: b, d: &ublk.Device{}, entry: StateEntry{UUID: b.Status().UUID, Members: slices.Clone(paths[:2])}}
	if _, err := m.Replace(0, "1", paths[2], false); err != nil {
		t.Fatal(err)
	}
	b.WaitSync()
	st, err := LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arrays) != 1 || slices.Contains(st.Arrays[0].Members, paths[1]) || !slices.Contains(st.Arrays[0].Members, paths[2]) {
		t.Fatalf("state file after replacing the unheld failed role 1 (%s) with %s: %+v", paths[1], paths[2], st.Arrays)
	}
	if err := b.SetClean(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// A new, blank disk at the failed member's path; the next restart.
	if err := os.WriteFile(paths[1], make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := openRetry(st.Arrays[0].Members, m.restoreSpec(st.Arrays[0]))
	if err != nil {
		t.Fatalf("restart after the replace: %v", err)
	}
	c.Close()
}

// The same replace failing after the new device took the role (the
// superblock update naming it fails): the array holds the new device in
// the role, so, as on success, the failed member's path leaves the state
// file. Kept there, nothing could drop it any more (the role is held) and
// a new disk put in later at that path stops the next start.
func TestReplaceUnheldFailedRolePartialFailureDropsIt(t *testing.T) {
	paths := files(t, 3, 8<<20)
	stoppedWithFailedRole1(t, paths[:2], array.CreateSpec{NoBitmap: true, AssumeClean: true})
	var armed atomic.Bool
	open := func(p string) (array.Device, error) {
		d, err := ublk.OpenMember(p)
		if err != nil {
			return d, err
		}
		switch p {
		case paths[0]: // the update after the new device's first write fails
			return hookDev{Device: d, before: func() error {
				if armed.Load() {
					return errors.New("injected write error")
				}
				return nil
			}}, nil
		case paths[2]:
			return hookDev{Device: d, after: func() { armed.Store(true) }}, nil
		}
		return d, nil
	}
	b, err := array.Open(paths[:2], array.CreateSpec{OpenDevice: open}, false) // the restart
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if st := b.Status(); st.Members[1].Path != "" || st.Members[1].State != "faulty" {
		t.Fatalf("after the restart: %+v", st.Members)
	}
	m, s := serving(b, StateEntry{UUID: b.Status().UUID, Members: slices.Clone(paths[:2])})
	_, err = m.Replace(0, "1", paths[2], false)
	if err == nil {
		t.Skip("the injected write error did not fail the replace")
	}
	if b.RoleOf(paths[2]) < 0 {
		t.Skipf("the replace failed before the new device took the role: %v", err)
	}
	if slices.Contains(s.entry.Members, paths[1]) || !slices.Contains(s.entry.Members, paths[2]) {
		t.Fatalf("replace of the unheld failed role 1 (%s) with %s failed (%v) with the new device in the role; state file members %v: want %s out, %s in",
			paths[1], paths[2], err, s.entry.Members, paths[1], paths[2])
	}
}
