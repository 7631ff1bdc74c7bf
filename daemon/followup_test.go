package daemon

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// symlink makes a symbolic link to target in a new directory.
func symlink(t *testing.T, target string) string {
	t.Helper()
	l := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, l); err != nil {
		t.Fatal(err)
	}
	return l
}

// Member operations find a member or a spare under any path to its
// device or file (as add tells a device given twice), not only under
// the string it was added with.
func TestMemberOperationsResolvePaths(t *testing.T) {
	const size = 8 << 20
	m, a, paths := servedMirror(t, size)
	spare := files(t, 1, size)[0]
	if err := a.AddSpare(spare); err != nil {
		t.Fatal(err)
	}
	// remove of the spare through a symlink to it.
	if code, msg := post(t, m, "/arrays/0/remove", map[string]string{"member": symlink(t, spare)}); code != http.StatusOK {
		t.Fatalf("remove of the spare through a symlink: %d %q", code, msg)
	}
	if sp := a.Spares(); len(sp) != 0 {
		t.Fatalf("spares after the remove: %v", sp)
	}
	// fail of role 1 through a symlink to it, and with dot-dot.
	for _, p := range []string{symlink(t, paths[1]), filepath.Dir(paths[1]) + "/../" + filepath.Base(filepath.Dir(paths[1])) + "/d1"} {
		before := a.Status()
		code, msg := post(t, m, "/arrays/0/fail", map[string]string{"member": p})
		if st := a.Status(); code != http.StatusOK || st.Members[1].State != "faulty" {
			t.Fatalf("fail %s: %d %q; role 1 %s", p, code, msg, st.Members[1].State)
		}
		if before.Members[1].State == "faulty" {
			continue
		}
		// re-add through the other path.
		if code, msg := post(t, m, "/arrays/0/re-add", map[string]string{"member": p}); code != http.StatusOK {
			t.Fatalf("re-add %s: %d %q", p, code, msg)
		}
		a.WaitSync()
		if st := a.Status(); st.Members[1].State != "active" || st.Members[1].Path != paths[1] {
			t.Fatalf("after re-add through %s: role 1 %+v", p, st.Members[1])
		}
	}
}

// add-spare of a device the array holds under another path is refused
// as such, and nothing is written to it.
func TestAddSpareOfAMemberUnderAnotherPath(t *testing.T) {
	const size = 8 << 20
	m, a, paths := servedMirror(t, size)
	before, st := hashes(t, paths...), a.Status()
	code, msg := post(t, m, "/arrays/0/add-spare", map[string]string{"member": symlink(t, paths[0])})
	if code != http.StatusConflict || !strings.Contains(msg, "already holds role 0") {
		t.Errorf("add-spare of role 0 through a symlink: %d %q; want 409 naming role 0", code, msg)
	}
	// Not even forced: force overwrites a device of another array, never
	// an active member.
	code, msg = post(t, m, "/arrays/0/add-spare", map[string]any{"member": symlink(t, paths[1]), "force": true})
	if code != http.StatusConflict || !strings.Contains(msg, "already holds role 1") {
		t.Errorf("forced add-spare of role 1 through a symlink: %d %q; want 409 naming role 1", code, msg)
	}
	sameHashes(t, "refused add-spare", before, hashes(t, paths...))
	if after := a.Status(); after.Events != st.Events || after.SpareDisks != 0 {
		t.Errorf("refused add-spare changed the array: %+v", after)
	}
}

// add-spare of several devices is all or nothing: one refused device
// (too small, holding data) leaves the others unwritten and not spares.
func TestAddSpareSeveralAllOrNothing(t *testing.T) {
	const size = 8 << 20
	for _, tc := range []struct {
		name string
		bad  func(t *testing.T) string
		want string
	}{
		{"too small", func(t *testing.T) string { return files(t, 1, size/2)[0] }, "needs at least"},
		{"ext4", func(t *testing.T) string { return withSignature(t, size, "ext4") }, "ext4 filesystem"},
		{"missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nonexistent") }, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, a, paths := servedMirror(t, size)
			good, bad := files(t, 1, size)[0], tc.bad(t)
			all := append(paths, good, bad)
			before, st := hashes(t, all...), a.Status()
			code, msg := post(t, m, "/arrays/0/add-spare", map[string][]string{"members": {good, bad}})
			if code != http.StatusConflict || !strings.Contains(msg, tc.want) {
				t.Errorf("add-spare of a good and a %s device: %d %q; want 409 naming %q", tc.name, code, msg, tc.want)
			}
			sameHashes(t, "refused add-spare", before, hashes(t, all...))
			if after := a.Status(); after.Events != st.Events || after.SpareDisks != 0 {
				t.Errorf("refused add-spare changed the array: %d spares %v, events %d (was %d)", after.SpareDisks, after.Spares, after.Events, st.Events)
			}
		})
	}
	m, a, _ := servedMirror(t, size)
	two := files(t, 2, size)
	if code, msg := post(t, m, "/arrays/0/add-spare", map[string][]string{"members": two}); code != http.StatusOK {
		t.Fatalf("add-spare of two good devices: %d %q", code, msg)
	}
	if sp := a.Spares(); !slices.Equal(sp, two) {
		t.Fatalf("spares %v, want %v", sp, two)
	}
}

// At assembly, a --write-mostly member that gets no role (here: failed,
// so stale) is refused before anything is written: the blank spare given
// with it stays as it was.
func TestAddWriteMostlyWithoutRoleWritesNothing(t *testing.T) {
	const size = 8 << 20
	paths := files(t, 2, size)
	stoppedWithFailedRole1(t, paths, array.CreateSpec{})
	blank := files(t, 1, size)[0]
	all := append(paths, blank)
	before := hashes(t, all...)
	five := 5
	m := NewManager(nil, ManagerOptions{})
	code, msg := post(t, m, "/arrays", AddRequest{Members: paths, Spares: []string{blank}, WriteMostly: paths[1:], Number: &five})
	if code != http.StatusConflict || !strings.Contains(msg, "write-mostly "+paths[1]) {
		t.Errorf("add with a write-mostly member that holds no role: %d %q; want 409 naming it", code, msg)
	}
	sameHashes(t, "refused add", before, hashes(t, all...))
}

// writeFailDev fails every write.
type writeFailDev struct{ array.Device }

func (d writeFailDev) WriteAt(p []byte, off int64) error { return errors.New("injected write error") }

// An add-spare of several devices that fails part-way (a write error on
// the second, after every check passed) leaves the first a spare of the
// array: the state file lists it too, so that a restarted daemon opens
// it again.
func TestAddSparePartialFailureRecordsTheSpareAdded(t *testing.T) {
	const size = 8 << 20
	paths := files(t, 4, size)
	good, bad := paths[2], paths[3]
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, OpenDevice: func(p string) (array.Device, error) {
		d, err := ublk.OpenMember(p)
		if err != nil || p != bad {
			return d, err
		}
		return writeFailDev{d}, nil
	}}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m, s := serving(a, StateEntry{Members: paths[:2]})
	code, msg := post(t, m, "/arrays/0/add-spare", map[string][]string{"members": {good, bad}})
	if code == http.StatusOK {
		t.Fatalf("add-spare with a device that fails every write: %d %q", code, msg)
	}
	if slices.Contains(a.Spares(), good) != slices.Contains(s.entry.Members, good) {
		t.Fatalf("spares %v, state file members %v: they disagree on %s", a.Spares(), s.entry.Members, good)
	}
}

// switchFailDev fails every write while *fail is set.
type switchFailDev struct {
	array.Device
	fail *atomic.Bool
}

func (d switchFailDev) WriteAt(p []byte, off int64) error {
	if d.fail.Load() {
		return errors.New("injected write error")
	}
	return d.Device.WriteAt(p, off)
}

// A remove of a spare whose superblock update fails still lets the spare
// go (it is closed): the state file drops it too, or a restarted daemon
// would open it again as a spare.
func TestRemoveSpareWriteErrorDropsItFromState(t *testing.T) {
	const size = 8 << 20
	paths := files(t, 3, size)
	var fail atomic.Bool
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, Spares: paths[2:],
		OpenDevice: func(p string) (array.Device, error) {
			d, err := ublk.OpenMember(p)
			if err != nil {
				return d, err
			}
			return switchFailDev{d, &fail}, nil
		}}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m, s := serving(a, StateEntry{Members: paths})
	fail.Store(true)
	code, msg := post(t, m, "/arrays/0/remove", map[string]string{"member": paths[2]})
	fail.Store(false)
	if slices.Contains(a.Spares(), paths[2]) != slices.Contains(s.entry.Members, paths[2]) {
		t.Fatalf("remove of the spare (%d %q): spares %v, state file members %v: they disagree", code, msg, a.Spares(), s.entry.Members)
	}
}

// hookDev runs before (a write error when it says so) and after each
// successful write.
type hookDev struct {
	array.Device
	before func() error
	after  func()
}

func (d hookDev) WriteAt(p []byte, off int64) error {
	if d.before != nil {
		if err := d.before(); err != nil {
			return err
		}
	}
	if err := d.Device.WriteAt(p, off); err != nil {
		return err
	}
	if d.after != nil {
		d.after()
	}
	return nil
}

// A replace that fails after the new device took the role (here: the
// superblock update naming it fails on the last in-sync copy) has let
// the old member go and holds the new one: the state file says so too,
// or a restarted daemon would give the assembly a device the array no
// longer holds (perhaps reused by then: it stops the assembly) and leave
// out the one it does.
func TestReplacePartialFailureKeepsStateInStep(t *testing.T) {
	const size = 8 << 20
	paths := files(t, 3, size)
	var armed atomic.Bool
	var writes atomic.Int32
	open := func(p string) (array.Device, error) {
		d, err := ublk.OpenMember(p)
		if err != nil {
			return d, err
		}
		switch p {
		case paths[0]: // the first update after the new device's first write passes (the old member's failure), the next fails
			return hookDev{Device: d, before: func() error {
				if armed.Load() && writes.Add(1) >= 2 {
					return errors.New("injected write error")
				}
				return nil
			}}, nil
		case paths[2]:
			return hookDev{Device: d, after: func() { armed.Store(true) }}, nil
		}
		return d, nil
	}
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m, s := serving(a, StateEntry{Members: paths[:2]})
	code, msg := post(t, m, "/arrays/0/replace", map[string]string{"member": "1", "with": paths[2]})
	for _, p := range []string{paths[1], paths[2]} {
		if held := a.RoleOf(p) >= 0; held != slices.Contains(s.entry.Members, p) {
			t.Errorf("replace (%d %q): %s held by the array %v, in the state file %v (%v)", code, msg, p, held, !held, s.entry.Members)
		}
	}
}

// After a restart, a failed member is not held by the array (assembly
// leaves it closed) but the state file still lists it. Removing its role
// (by number: the array has no path for it) must drop it from the state
// file as a remove always does: otherwise, once the dead disk is pulled,
// the next start cannot open it and the array stays down.
func TestRemoveAfterRestartDropsTheFailedMemberFromState(t *testing.T) {
	paths := files(t, 2, 8<<20)
	// The restart: assembled from the state file's paths.
	b := restartedWithFailedRole1(t, paths, array.CreateSpec{NoBitmap: true, AssumeClean: true})
	if st := b.Status(); st.Members[1].State != "faulty" || st.Members[1].Path != "" {
		t.Fatalf("after the restart role 1 is %+v", st.Members[1])
	}
	m, s := serving(b, StateEntry{Members: paths})
	post(t, m, "/arrays/0/remove", map[string]string{"member": "1"})
	if st := b.Status(); st.Members[1].State != "missing" {
		t.Fatalf("remove 1: role 1 is %+v", st.Members[1])
	}
	if slices.Contains(s.entry.Members, paths[1]) {
		t.Fatalf("after remove of role 1 the state file still lists %s: %v", paths[1], s.entry.Members)
	}
}

// After a restart, a failed member is not held by the array, but remove
// by its path still finds its role (from its superblock) and drops it
// from the state file, as remove by role number does; a path it cannot
// tell answers 404 naming the role numbers to use.
func TestRemoveAfterRestartByPath(t *testing.T) {
	paths := files(t, 3, 8<<20)
	stoppedWithFailedRole1(t, paths[:2], array.CreateSpec{NoBitmap: true, AssumeClean: true})
	b, err := array.Open(paths[:2], array.CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	m, s := serving(b, StateEntry{Members: paths[:2]})
	code, msg := post(t, m, "/arrays/0/remove", map[string]string{"member": paths[2]})
	if code != http.StatusNotFound || !strings.Contains(msg, "faulty roles without a device: 1") {
		t.Fatalf("remove of a device never in the array: %d %q", code, msg)
	}
	if code, msg := post(t, m, "/arrays/0/remove", map[string]string{"member": paths[1]}); code != http.StatusOK {
		t.Fatalf("remove of the failed member by path after a restart: %d %q", code, msg)
	}
	if st := b.Status(); st.Members[1].State != "missing" {
		t.Fatalf("remove %s: role 1 is %+v", paths[1], st.Members[1])
	}
	if slices.Contains(s.entry.Members, paths[1]) {
		t.Fatalf("after remove of %s the state file still lists it: %v", paths[1], s.entry.Members)
	}
}

// Write-mostly belongs to the role: the device a replace puts into a
// write-mostly role is write-mostly in the state file too (it listed the
// old path, so a restart left the new member read like any other).
func TestReplaceKeepsWriteMostlyInState(t *testing.T) {
	paths := files(t, 3, 8<<20)
	a, err := array.Open(paths[:2], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true,
		WriteMostly: paths[1:2]}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m, s := serving(a, StateEntry{Members: paths[:2], WriteMostly: paths[1:2]})
	if code, msg := post(t, m, "/arrays/0/replace", map[string]string{"member": "1", "with": paths[2]}); code != http.StatusOK {
		t.Fatalf("replace: %d %q", code, msg)
	}
	a.WaitSync()
	if a.WriteMostly != 1<<1 || !slices.Equal(s.entry.WriteMostly, paths[2:]) {
		t.Fatalf("after replacing write-mostly role 1 with %s: mask %#x, state file write-mostly %v", paths[2], a.WriteMostly, s.entry.WriteMostly)
	}
}

// del waits for the member operation under way on the array (it holds
// the array's operation lock here): one that went on after the stop
// marked the array clean would leave non-clean superblocks behind, and a
// needless resync at the next start. (The lock is never released: the
// device here is not a real one.)
func TestDeleteWaitsForMemberOperation(t *testing.T) {
	paths := files(t, 2, 8<<20)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m := NewManager(nil, ManagerOptions{})
	const n = 1000 // no /dev/ublkb1000: not in use
	s := &served{n: n, a: a, d: &ublk.Device{}, entry: StateEntry{Members: paths}}
	m.arrays[n] = s
	s.opMu.Lock() // an operation under way
	go m.Delete(n)
	time.Sleep(200 * time.Millisecond)
	m.mu.Lock()
	still := m.arrays[n] == s
	m.mu.Unlock()
	if !still {
		t.Fatal("del went on while a member operation held the array")
	}
}

// stoppedWithFailedRole1 creates a raid1 over paths with spec, fails role
// 1 (recorded in the superblocks) and stops the array cleanly: a failed
// member as a restart finds it.
func stoppedWithFailedRole1(t *testing.T, paths []string, spec array.CreateSpec) {
	t.Helper()
	spec.Level = engine.Level1
	a, err := array.Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
}

// restartedWithFailedRole1 is stoppedWithFailedRole1 then the restart: the
// array assembled again from paths (role 1 faulty, its device not held).
func restartedWithFailedRole1(t *testing.T, paths []string, spec array.CreateSpec) *array.Array {
	t.Helper()
	stoppedWithFailedRole1(t, paths, spec)
	b, err := array.Open(paths, array.CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// serving is a manager serving a as array 0 (no device) with state entry e.
func serving(a *array.Array, e StateEntry) (*Manager, *served) {
	m := NewManager(nil, ManagerOptions{})
	s := &served{n: 0, a: a, entry: e}
	m.arrays[0] = s
	return m, s
}
