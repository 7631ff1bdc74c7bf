package array

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

func TestFailRemoveStatus(t *testing.T) {
	paths := memberFiles(t, 2, 64<<20)
	a, err := Open(paths, CreateSpec{Name: "m", Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	s := a.Status()
	if s.State != "active" || s.ActiveDisks != 2 || s.Degraded || s.Level != "raid1" || s.Name != "m" || len(s.UUID) != 36 {
		t.Fatalf("new array status %+v", s)
	}
	if err := a.Remove(1); err == nil {
		t.Fatal("removing an active member succeeded")
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(0); err == nil {
		t.Fatal("failing the last copy succeeded")
	}
	s = a.Status()
	if s.State != "degraded" || s.FailedDisks != 1 || s.Members[1].State != "faulty" || s.Members[1].Path != paths[1] {
		t.Fatalf("after fail: %+v", s)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	if s = a.Status(); s.MissingDisks != 1 || s.Members[1].State != "missing" {
		t.Fatalf("after remove: %+v", s)
	}
	a.Close()

	// The superblocks recorded it: the removed member is not assembled.
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if s := b.Status(); s.ActiveDisks != 1 || s.Members[0].State != "active" {
		t.Fatalf("reassembled after remove: %+v", s)
	}
	if b.RoleOf(paths[0]) != 0 || b.RoleOf(paths[1]) != -1 {
		t.Fatalf("RoleOf: %d %d", b.RoleOf(paths[0]), b.RoleOf(paths[1]))
	}
}

// A member whose superblock write fails is failed, and the survivors'
// superblocks say so.
func TestSuperblockWriteFailureFailsMember(t *testing.T) {
	paths := memberFiles(t, 3, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == paths[2] {
			return errors.New("injected write error")
		}
		return orig(m, b)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatalf("a superblock update that two members took failed: %v", err)
	}
	if st := a.Status(); st.Members[2].State != "faulty" || st.FailedDisks != 1 {
		t.Fatalf("after a failed superblock write: %+v", st)
	}
	for _, p := range paths[:2] {
		if sb := superblockOf(t, p); sb.Roles[2].State != engine.RoleFaulty {
			t.Fatalf("%s's role table says role 2 is %v", p, sb.Roles[2].State)
		}
	}
}

// A superblock write failure never fails the last in-sync copy (md's
// rule, as for data writes): role 0 is the only active member (role 1
// failed, role 2 not yet rebuilt); its failed update, which role 2 took,
// leaves it active and reports the error.
func TestSuperblockWriteFailureKeepsLastCopy(t *testing.T) {
	paths := memberFiles(t, 3, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	a.Engine.Update(func(ms []engine.MemberStatus) {
		ms[2] = engine.MemberStatus{State: engine.MemberRebuilding}
	})
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == paths[0] {
			return errors.New("injected write error")
		}
		return orig(m, b)
	}
	if err := a.SetClean(false); err == nil {
		t.Fatal("a superblock update the last in-sync copy refused succeeded")
	}
	if st := a.Status(); st.Members[0].State != "active" {
		t.Fatalf("the last in-sync copy was failed by a superblock write error: %+v", st.Members[0])
	}
	// Nor did the others move ahead of it: assembly would find the one
	// copy of the data generations behind them.
	if e0, e2 := superblockOf(t, paths[0]).Events, superblockOf(t, paths[2]).Events; e2 > e0 {
		t.Fatalf("role 2 took generation %d while the last in-sync copy stayed at %d", e2, e0)
	}
}

// Failing a raid0 member by hand is refused with nothing written: every
// member holds the only copy of its chunks (md answers EBUSY), and a
// recorded failure would leave an array that no longer assembles.
func TestFailRAID0MemberRefused(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level0, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	before, events := contents(t, paths...), a.Status().Events
	if err := a.Fail(1); err == nil {
		t.Error("failing a raid0 member succeeded")
	}
	if st := a.Status(); st.State != "active" || st.ActiveDisks != 2 || st.Events != events {
		t.Errorf("refused fail changed the array: %+v", st)
	}
	unchanged(t, "refused raid0 fail", paths, before)
	a.Close()
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatalf("raid0 after a refused fail does not assemble: %v", err)
	}
	b.Close()
}

// A remove of a failed member races the spare activation its failure
// started (`fail` then `remove` at once, as mdadm --fail --remove): the
// removal must not take the role back from the spare once the spare holds
// it. Here the activation is caught while the queues take up the spare
// (its member swapped in, its state not yet rebuilding): a removal that
// checked the role faulty then would mark it missing and close the spare.
func TestRemoveDuringSpareActivation(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := a.newQueue(&fakeRing{done: map[uint16]error{}})
	h.syncFiles()
	seen := a.filesEpoch.Load()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	// The activation swaps the spare in and waits for the queue.
	waitFor(t, "the spare swapped in", func() bool { return a.filesEpoch.Load() > seen })
	removed := make(chan error, 1)
	go func() { removed <- a.Remove(1) }()
	time.Sleep(100 * time.Millisecond)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the queue thread takes up the files
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				h.syncFiles()
			}
		}
	}()
	err = <-removed
	a.WaitSync()
	st := a.Status()
	if st.Members[1].Path != paths[2] || st.Members[1].State != "active" || !heldOpen(t, paths[2]) {
		t.Fatalf("remove during the spare's activation (err %v) left role 1 %+v, spare open %v", err, st.Members[1], heldOpen(t, paths[2]))
	}
	if sb := superblockOf(t, paths[0]); sb.Roles[1].State != engine.RoleActive {
		t.Fatalf("superblock of role 0 says role 1 is %v", sb.Roles[1].State)
	}
}

// A remove whose superblock update no member took changes nothing: the
// role stays faulty with its device open, and a retry removes it (it
// said "already removed", the device still open, when the role was
// marked missing before the write).
func TestRemoveWriteFailureRetry(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	writeSuperblock = func(m *Member, b []byte) error { return errors.New("injected write error") }
	if err := a.Remove(1); err == nil {
		t.Fatal("a remove no superblock took succeeded")
	}
	if st := a.Status(); st.Members[1].State != "faulty" || st.Members[1].Path != paths[1] || !heldOpen(t, paths[1]) {
		t.Fatalf("after a failed remove: role 1 %+v, open %v", st.Members[1], heldOpen(t, paths[1]))
	}
	writeSuperblock = orig
	if err := a.Remove(1); err != nil {
		t.Fatalf("retried remove: %v", err)
	}
	if st := a.Status(); st.Members[1].State != "missing" || st.Members[1].Path != "" || heldOpen(t, paths[1]) {
		t.Fatalf("after the retried remove: role 1 %+v, open %v", st.Members[1], heldOpen(t, paths[1]))
	}
	if sb := superblockOf(t, paths[0]); sb.Roles[1].State != engine.RoleMissing {
		t.Fatalf("superblock of role 0 says role 1 is %v", sb.Roles[1].State)
	}
}

// A remove that waited for the spare activation its failure started finds
// the spare in the role: it is refused, saying that the failed member is
// out already, not advising to fail the role (which now is the spare).
func TestRemoveAfterSpareTookTheRole(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.spareMu.Lock() // the activation waits, and then the remove behind it
	if err := a.Fail(1); err != nil {
		a.spareMu.Unlock()
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	removed := make(chan error, 1)
	go func() { removed <- a.Remove(1) }()
	time.Sleep(100 * time.Millisecond)
	a.spareMu.Unlock()
	err = <-removed
	a.WaitSync()
	if st := a.Status(); st.Members[1].Path != paths[2] {
		t.Skipf("the remove ran before the activation (err %v): role 1 %+v", err, st.Members[1])
	}
	if err == nil || strings.Contains(err.Error(), "fail it first") || !strings.Contains(err.Error(), "out of the array already") {
		t.Fatalf("remove after the spare took role 1: %v", err)
	}
}

// TestFailDeviceAfterSpareTookTheRole: fail of a member named by its path,
// after the daemon failed it and a spare took its role, answers 0 (md's
// fail of a faulty device) and leaves the spare alone (Fail of the role
// would fail the spare).
func TestFailDeviceAfterSpareTookTheRole(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Status().Members[1].Path != paths[2] {
		if time.Now().After(deadline) {
			t.Fatalf("the spare did not take role 1: %+v", a.Status().Members[1])
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := a.FailDevice(1, paths[1]); err != nil {
		t.Fatalf("fail of %s after a spare took its role: %v", paths[1], err)
	}
	a.WaitSync()
	if st := a.Status(); st.Members[1].Path != paths[2] || st.Members[1].State == "faulty" || st.ActiveDisks != 2 {
		t.Fatalf("the spare in role 1 was failed: %+v", st.Members[1])
	}
	if err := a.FailDevice(1, paths[2]); err != nil {
		t.Fatalf("fail of the device holding role 1: %v", err)
	}
}
