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

// Found by review: a check asked (Manager.Check) while a spare's activation, started
// by a member failure, is between putting the spare in the role and
// starting its rebuild: the check starts (Check is not serialised with the
// activation: it holds the Manager's operation lock, the activation
// spareMu), the rebuild's start is refused ("a check is running"), and the
// spare stayed "rebuilding" with no job to rebuild it, after the check
// ended too: the array ran degraded until the next assembly. md picks
// recovery before a requested check (md_check_recovery /
// remove_and_add_spares), and never leaves a spare in a role idle. The
// rebuild now starts when the check ends.
func TestCheckDuringSpareActivationRebuilds(t *testing.T) {
	paths := files(t, 4, 16<<20)
	g := &gatedDev{entered: make(chan struct{}), release: make(chan struct{})}
	open := g.opening(paths[3])
	a, err := array.Open(paths[:3], array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true,
		Spares: paths[3:], OpenDevice: open, SyncMaxBytes: 2 << 20}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	state := filepath.Join(t.TempDir(), "arrays.json")
	m := NewManager(nil, ManagerOptions{StateFile: state})
	m.arrays[0] = &served{n: 0, a: a, d: &ublk.Device{}, entry: StateEntry{Number: 0, UUID: a.Status().UUID, Members: slices.Clone(paths)}}
	if err := m.saveState(); err != nil {
		t.Fatal(err)
	}
	// The spare's superblock write as it takes the role (persist, after
	// Members[role] = spare, before the rebuild's start) waits.
	g.mu.Lock()
	g.armed, g.lo, g.hi = true, engine.SuperblockOffset, engine.SuperblockOffset+engine.SuperblockSize
	g.mu.Unlock()
	if err := a.Fail(1); err != nil { // as a member failing by I/O error (Manager.Fail answers with a view, which waits for the gated write)
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the spare's activation did not start")
	}
	type res struct{ err error }
	ck := make(chan res, 1)
	go func() { _, err := m.Check(0); ck <- res{err} }()
	var cerr error
	select {
	case r := <-ck:
		cerr = r.err
	case <-time.After(time.Second):
		t.Log("check answer waits (its view, for the array lock)")
	}
	g.mu.Lock()
	g.armed = false
	g.mu.Unlock()
	close(g.release)
	for deadline := time.Now().Add(10 * time.Second); a.RoleOf(paths[3]) != 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("check: %v; sync now %+v", cerr, a.SyncStatus())
	// The check (16 MiB at 2 MiB/s) ends; the spare must then be rebuilt.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st := a.Status()
		if st.Members[1].State == "active" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("30 s after the activation the spare is still %s in role 1 (rebuild offset %d), sync %+v: no job rebuilds it",
		a.Status().Members[1].State, a.Status().Members[1].RebuildOffset, a.SyncStatus())
}
