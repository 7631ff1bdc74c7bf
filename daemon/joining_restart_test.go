package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Found by review: a replacement whose superblock write was reached,
// recorded only as joining (the daemon died before its own state write),
// and not yet present when the daemon restarts (udev coldplugs it a moment
// later). The start dropped it from the state file with no word. Whether
// the operation reached a device that cannot be read is not known (see
// TestJoiningUnreadBesideAbsentSpare: listed, a blank one stopped every
// later start), so it is still left out, but the log says so and what to
// do; the array starts without it, as md starts without a rebuilding
// member.
func TestJoiningReplacementAbsentAtRestartWarned(t *testing.T) {
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true,
		SyncMinBytes: 64 << 10, SyncMaxBytes: 64 << 10}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	state := filepath.Join(t.TempDir(), "arrays.json")
	entry := StateEntry{Number: 0, UUID: uuid, Members: slices.Clone(paths[:2])}
	if err := SaveState(state, State{Arrays: []StateEntry{entry}}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: entry}
	saved := writeState
	t.Cleanup(func() { writeState = saved })
	var atCrash *State
	writeState = func(path string, s State) error {
		if atCrash == nil && a.Status().Members[1].Path == paths[2] {
			st, err := LoadState(path)
			if err != nil {
				t.Fatal(err)
			}
			atCrash = &st
		}
		return saved(path, s)
	}
	if _, err := m.Replace(0, "1", paths[2], false); err != nil {
		t.Fatal(err)
	}
	writeState = saved
	a.StopSync()
	a.Close()
	if atCrash == nil {
		t.Fatal("setup: no state write after the new member took the role")
	}
	t.Logf("state at the crash: members %v joining %v", atCrash.Arrays[0].Members, atCrash.Arrays[0].Joining)

	fakeDevices(t)
	if err := SaveState(state, *atCrash); err != nil {
		t.Fatal(err)
	}
	// The replacement is not there yet when the daemon starts.
	away := paths[2] + ".notyet"
	if err := os.Rename(paths[2], away); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	n := NewManager(nil, ManagerOptions{StateFile: state, Log: zap.New(core)})
	started, failed, err := n.Restore()
	t.Logf("restart without the replacement present: %d started, %d failed, %v", started, failed, err)
	// It appears.
	if err := os.Rename(away, paths[2]); err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Fatalf("restart: %d started, %d failed, %v", started, failed, err)
	}
	s := n.arrays[0]
	t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
	warned := false
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "cannot be read") && strings.Contains(e.Message, "re-add") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("the joining replacement left out without a warning: %v", logs.All())
	}
	if st := s.a.Status(); st.Members[0].Path != paths[0] || st.Members[0].State != "active" {
		t.Errorf("role 0 after the restart: %+v", st.Members[0])
	}
}

// Found by review: raid1 A (role 0) + C (role 1). C left (split brain: assembled
// alone elsewhere and run for longer, so its superblock is fresher); this
// daemon serves A's side alone (listed: A). The user adds C as a spare:
// refused without --force (it carries this array's superblock), or with
// --force, to be overwritten as a new device. Either way the daemon
// records C as joining before anything is written; dying then (during the
// refused checks, or before the forced superblock write) left a state
// // file whose restart took C (the array's UUID, a member UUID no listed
// path has) and assembled A and C: C's side is the freshest, so the
// device came back serving C's data, A missing. A joining device is now
// taken only when the listed members' freshest table names it in a role
// or as a spare, and it is not ahead of them: the restart serves A, as
// before the command.
func TestAddSpareOfOtherSideCrashKeepsThisSide(t *testing.T) {
	for _, tc := range []struct {
		name        string
		force, same bool
	}{{"refused", false, false}, {"forced", true, false}, {"refused-same-events", false, true}} {
		force := tc.force
		t.Run(tc.name, func(t *testing.T) {
			paths := files(t, 2, 8<<20) // A, C
			a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
			if err != nil {
				t.Fatal(err)
			}
			uuid := a.Status().UUID
			if err := a.SetClean(true); err != nil {
				t.Fatal(err)
			}
			a.Close()
			runAlone := func(p string) {
				x, err := array.Open([]string{p}, array.CreateSpec{}, false)
				if err != nil {
					t.Fatal(err)
				}
				if err := x.SetClean(false); err != nil {
					t.Fatal(err)
				}
				if err := x.SetClean(true); err != nil {
					t.Fatal(err)
				}
				x.Close()
			}
			if tc.same { // each side ran alone once: equal events, tables that disagree
				runAlone(paths[0])
				runAlone(paths[1])
			}
			a, err = array.Open(paths[:1], array.CreateSpec{}, false) // A's side, here
			if err != nil {
				t.Fatal(err)
			}
			if err := a.SetClean(false); err != nil { // (served: role 1 recorded missing, as the daemon's start does)
				t.Fatal(err)
			}
			ev := func(p string) uint64 {
				sb, err := readSuperblock(p)
				if err != nil {
					t.Fatal(err)
				}
				return sb.Events
			}
			if !tc.same {
				for ev(paths[1]) <= ev(paths[0]) { // C's side, elsewhere, for longer
					runAlone(paths[1])
				}
			} else if ev(paths[1]) != ev(paths[0]) {
				t.Skipf("events %d and %d", ev(paths[0]), ev(paths[1]))
			}
			t.Logf("events: A %d, C %d", ev(paths[0]), ev(paths[1]))
			state := filepath.Join(t.TempDir(), "arrays.json")
			entry := StateEntry{Number: 0, UUID: uuid, Members: slices.Clone(paths[:1])}
			if err := SaveState(state, State{Arrays: []StateEntry{entry}}); err != nil {
				t.Fatal(err)
			}
			m := NewManager(nil, ManagerOptions{StateFile: state})
			m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: entry}
			var atCrash *State
			var disks [2][]byte // the members' bytes at the crash
			saved := writeState
			t.Cleanup(func() { writeState = saved })
			writeState = func(path string, s State) error {
				err := saved(path, s)
				if atCrash == nil { // the joining record: the daemon dies here
					st, lerr := LoadState(path)
					if lerr != nil {
						t.Fatal(lerr)
					}
					atCrash = &st
					for i := range disks {
						if disks[i], lerr = os.ReadFile(paths[i]); lerr != nil {
							t.Fatal(lerr)
						}
					}
				}
				return err
			}
			_, aerr := m.AddSpare(0, []string{paths[1]}, force)
			writeState = saved
			t.Logf("add-spare (force %v): %v", force, aerr)
			if before := a.Status(); before.Members[0].Path != paths[0] {
				t.Fatalf("setup: role 0 is %q", before.Members[0].Path)
			}
			a.StopSync()
			a.Close()
			if atCrash == nil || len(atCrash.Arrays[0].Joining) == 0 {
				t.Fatalf("setup: no joining record written: %+v", atCrash)
			}
			for i := range disks { // (the forced add went on writing after the crash point)
				if err := os.WriteFile(paths[i], disks[i], 0o600); err != nil {
					t.Fatal(err)
				}
			}
			fakeDevices(t)
			if err := SaveState(state, *atCrash); err != nil {
				t.Fatal(err)
			}
			n := NewManager(nil, ManagerOptions{StateFile: state})
			started, failed, err := n.Restore()
			if started != 1 {
				e := atCrash.Arrays[0]
				_, oerr := openOnce(append(slices.Clone(e.Members), e.Joining...), n.restoreSpec(e))
				left := n.RetryPending()
				t.Fatalf("restart after a crash in add-spare (force %v) of C: %d started, %d failed, %v; a retry leaves %d pending (A alone was served before the command): %v", force, started, failed, err, left, oerr)
			}
			s := n.arrays[0]
			t.Cleanup(func() { s.a.StopSync(); s.a.Close() })
			st := s.a.Status()
			if st.Members[0].Path != paths[0] || st.Members[0].State != "active" {
				t.Fatalf("restart after a crash in add-spare (force %v) of the other side C: the array serves role 0 %s %q, role 1 %s %q; before the command it served A (%s) alone: C's data is served in place of A's",
					force, st.Members[0].State, st.Members[0].Path, st.Members[1].State, st.Members[1].Path, paths[0])
			}
		})
	}
}
