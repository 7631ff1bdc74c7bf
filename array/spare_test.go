package array

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// heldOpen reports whether this process has path open.
func heldOpen(t *testing.T, path string) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == path {
			return true
		}
	}
	return false
}

// superblockOf reads path's superblock.
func superblockOf(t *testing.T, path string) *engine.Superblock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, engine.SuperblockSize)
	if _, err := f.ReadAt(b, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	sb, err := engine.ParseSuperblock(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return sb
}

// listsSpare reports whether sb's role table names uuid as a spare.
func listsSpare(sb *engine.Superblock, uuid [16]byte) bool {
	for i := int(sb.Members); i < engine.RoleTableSize; i++ {
		if sb.Roles[i].State == engine.RoleSpare && sb.Roles[i].Member == uuid {
			return true
		}
	}
	return false
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A spare given at creation takes the role of a member that fails, is
// rebuilt, and the failed device is let go; assembly later knows who is
// who.
func TestSpareTakesFailedRole(t *testing.T) {
	paths := memberFiles(t, 3, 32<<20)
	a, err := Open(paths[:2], CreateSpec{Name: "sp", Level: engine.Level1, AssumeClean: true, RegionSectors: 1 << 11,
		Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if st := a.Status(); len(st.Spares) != 1 || st.Spares[0] != paths[2] || st.SpareDisks != 1 {
		t.Fatalf("status of a new array with a spare: %+v", st)
	}
	spareSB := superblockOf(t, paths[2])
	if !spareSB.IsSpare() || !listsSpare(superblockOf(t, paths[0]), spareSB.MemberUUID) {
		t.Fatal("the spare's superblock or the members' role table does not say spare")
	}
	scribble(t, a, paths[0], 0, 2<<20, 0x5a)
	scribble(t, a, paths[1], 0, 2<<20, 0x5a)
	activated := make(chan int, 1)
	a.OnSpareActivated = func(role int, path string, err error) {
		if err != nil || path != paths[2] {
			t.Errorf("spare activation: role %d %s: %v", role, path, err)
		}
		activated <- role
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-activated:
		if r != 1 {
			t.Fatalf("the spare went to role %d, want 1", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no spare activation after a member failed")
	}
	a.WaitSync()
	st := a.Status()
	if st.ActiveDisks != 2 || st.Members[1].Path != paths[2] || len(st.Spares) != 0 {
		t.Fatalf("after the spare's rebuild: %+v", st)
	}
	if s := a.SyncStatus(); s.LastAction != "rebuild" || s.LastResult != "ok" {
		t.Fatalf("sync: %+v", s)
	}
	if !bytes.Equal(dataOf(t, a, paths[2]), dataOf(t, a, paths[0])) {
		t.Fatal("the spare does not hold the data after its rebuild")
	}
	if heldOpen(t, paths[1]) {
		t.Fatal("the failed member is still held open after the spare replaced it")
	}
	if sb := superblockOf(t, paths[0]); listsSpare(sb, spareSB.MemberUUID) || sb.Roles[1].Member != spareSB.MemberUUID {
		t.Fatal("the role table does not give role 1 to the former spare")
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()

	// All three devices given: the failed one is stale and let go.
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if st := b.Status(); st.ActiveDisks != 2 || st.Members[1].Path != paths[2] || len(st.Spares) != 0 {
		t.Fatalf("reassembled: %+v", st)
	}
}

// A spare added to a running array is listed, survives assembly, and is
// let go by RemoveSpare; devices that cannot be spares are refused with
// nothing written.
func TestAddRemoveSpare(t *testing.T) {
	paths := memberFiles(t, 5, 32<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.AddSpare(paths[2]); err != nil {
		t.Fatal(err)
	}
	if got := a.Spares(); len(got) != 1 || got[0] != paths[2] {
		t.Fatalf("spares %v", got)
	}
	if err := a.AddSpare(paths[2]); err == nil {
		t.Fatal("the same spare added twice")
	}
	if err := a.AddSpare(paths[0]); err == nil {
		t.Fatal("a member added as a spare")
	}
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(small, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.AddSpare(small); err == nil || !strings.Contains(err.Error(), "needs at least") {
		t.Fatalf("a too small spare: %v", err)
	}
	if b, _ := os.ReadFile(small); !bytes.Equal(b, make([]byte, 4<<20)) {
		t.Fatal("the refused spare was written")
	}
	other, err := Open(paths[3:5], CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	other.SetClean(true)
	other.Close()
	before, _ := os.ReadFile(paths[3])
	if err := a.AddSpare(paths[3]); err == nil || !strings.Contains(err.Error(), "superblock of array") {
		t.Fatalf("a member of another array as a spare: %v", err)
	}
	if after, _ := os.ReadFile(paths[3]); !bytes.Equal(before, after) {
		t.Fatal("the other array's member was written")
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()

	b, err := Open(paths[:3], CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Spares(); len(got) != 1 || got[0] != paths[2] {
		t.Fatalf("assembled spares %v", got)
	}
	if err := b.RemoveSpare(paths[1]); err == nil {
		t.Fatal("RemoveSpare of a member accepted")
	}
	uuid := superblockOf(t, paths[2]).MemberUUID
	if err := b.RemoveSpare(paths[2]); err != nil {
		t.Fatal(err)
	}
	if heldOpen(t, paths[2]) || len(b.Spares()) != 0 || listsSpare(superblockOf(t, paths[0]), uuid) {
		t.Fatal("a removed spare is still held or listed")
	}
}

// Remove lets go of the member's device; re-add opens it again.
func TestRemoveReleasesDevice(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if !heldOpen(t, paths[1]) {
		t.Fatal("a failed member is expected to stay open until removed")
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	if heldOpen(t, paths[1]) {
		t.Fatal("a removed member is still held open")
	}
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	waitFor(t, "the re-added member is active", func() bool { return a.Status().ActiveDisks == 2 })
	// Its next failure is reported again.
	var reports int
	a.OnMemberFailed = func(int, string) { reports++ }
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if reports != 1 {
		t.Fatalf("a second failure of role 1 was reported %d times", reports)
	}
}

// A spare given at creation that is too small fails creation before
// anything is written.
func TestCreateWithBadSpareWritesNothing(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(small, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(paths, CreateSpec{Level: engine.Level1, Spares: []string{small}}, true); err == nil {
		t.Fatal("a too small spare was accepted")
	}
	if _, err := Open(paths, CreateSpec{Level: engine.Level0, Spares: []string{small}}, true); err == nil {
		t.Fatal("a raid0 with a spare was accepted")
	}
	for _, p := range append(paths, small) {
		b, _ := os.ReadFile(p)
		if !bytes.Equal(b, make([]byte, len(b))) {
			t.Fatalf("%s was written by a refused creation", p)
		}
	}
}

// A replacement while another rebuild runs is refused before anything
// changes (the new member would otherwise sit in its role with no job to
// rebuild it).
func TestReplaceRefusedWhileRebuilding(t *testing.T) {
	paths := memberFiles(t, 5, 32<<20)
	a, err := Open(paths[:3], CreateSpec{Level: engine.Level1, AssumeClean: true,
		SyncMinBytes: 1 << 20, SyncMaxBytes: 1 << 20}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(2, paths[3]); err != nil {
		t.Fatal(err)
	}
	if s := a.SyncStatus(); s.Action != "rebuild" {
		t.Fatalf("no rebuild running: %+v", s)
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(1, paths[4]); err == nil || !strings.Contains(err.Error(), "rebuild is running") {
		t.Fatalf("replace during a rebuild: %v", err)
	}
	if st := a.Status(); st.Members[1].State != "faulty" || st.Members[1].Path != paths[1] || heldOpen(t, paths[4]) {
		t.Fatalf("a refused replace changed the array: %+v", st.Members[1])
	}
	a.StopSync()
}

// readHookDev runs onRead (once) before its first read.
type readHookDev struct {
	Device
	once   *sync.Once
	onRead func()
}

func (d readHookDev) ReadAt(p []byte, off int64) error {
	d.once.Do(d.onRead)
	return d.Device.ReadAt(p, off)
}

// A spare's superblock is one generation's: its events and its role
// table come from the same superblock. Here a generation (role 1's
// failure) is written while the spare is being checked (its signatures
// read), after its superblock was copied from the members'; then the
// members' next update fails. A spare carrying the new events with the
// older table would disagree with the members at the same events, and
// assembly refuses an array whose members disagree. (Found by the array
// model: a rebuild ended while a spare was added.)
func TestSpareSuperblockIsOneGeneration(t *testing.T) {
	paths := memberFiles(t, 4, 32<<20)
	var a *Array
	var once sync.Once
	spec := CreateSpec{Level: engine.Level1, AssumeClean: true, OpenDevice: func(p string) (Device, error) {
		d, err := openFile(p)
		if err != nil || p != paths[3] {
			return d, err
		}
		return readHookDev{Device: d, once: &once, onRead: func() {
			if err := a.Fail(1); err != nil {
				t.Errorf("fail role 1 meanwhile: %v", err)
			}
		}}, nil
	}}
	var err error
	a, err = Open(paths[:3], spec, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	fresh := superblockOf(t, paths[0]).Events
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path != paths[3] && a.events > fresh+1 {
			return errors.New("injected write error") // the update after role 1's failure
		}
		return orig(m, b)
	}
	if err := a.AddSpare(paths[3]); err == nil {
		t.Fatal("adding a spare no member could record succeeded")
	}
	spare, member := superblockOf(t, paths[3]), superblockOf(t, paths[0])
	if member.Roles[1].State != engine.RoleFaulty {
		t.Fatalf("role 1's failure was not recorded: %v", member.Roles[1].State)
	}
	if spare.Events == member.Events {
		for i := range 3 {
			if spare.Roles[i].State != member.Roles[i].State {
				t.Fatalf("the spare and role 0 disagree at events %d on role %d: %v, %v",
					spare.Events, i, spare.Roles[i].State, member.Roles[i].State)
			}
		}
	}
}
