package array

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// gateRW is a memberIO rw that lets the first n data writes through and
// holds the next one until released.
type gateRW struct {
	n       int64
	writes  atomic.Int64
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGateRW(n int64) *gateRW {
	return &gateRW{n: n, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateRW) rw(d Device, p []byte, off int64, write bool) error {
	if write && p != nil && g.writes.Add(1) == g.n+1 {
		g.once.Do(func() { close(g.reached) })
		<-g.release
	}
	return deviceRW(d, p, off, write)
}

// stopJob cancels the running background job without waiting for it.
func stopJob(a *Array) {
	a.sync.mu.Lock()
	cancel := a.sync.cancel
	a.sync.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// A rebuild stopped part-way (del, restart, kill) resumes at the next
// assembly from its checkpoint, keeps the checkpoint in the superblocks,
// and completes with equal copies. It used to panic (nil checkpoint map)
// and record a recovery offset of 0.
func TestRebuildResumesFromCheckpoint(t *testing.T) {
	paths := memberFiles(t, 3, 32<<20)
	gate := newGateRW(8)
	memberRW = gate.rw
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
	n := int(a.Engine.Geo.MemberSectors << 9)
	pat := make([]byte, n)
	for i := range pat {
		pat[i] = byte(i*7 + i>>12)
	}
	scribble0 := func(path string) {
		scribbleBytes(t, a, path, 0, pat)
	}
	scribble0(paths[0])
	scribble0(paths[1])
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(1, paths[2]); err != nil {
		t.Fatal(err)
	}
	<-gate.reached
	stopJob(a)
	close(gate.release)
	a.Close()
	memberRW = deviceRW

	if sb := superblockOf(t, paths[0]); sb.Roles[1].State != engine.RoleRebuilding || sb.Roles[1].RecoveryOffset == 0 {
		t.Fatalf("stopped rebuild recorded as %v at %d", sb.Roles[1].State, sb.Roles[1].RecoveryOffset)
	}
	b, err := Open([]string{paths[0], paths[2]}, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := b.Engine.State().Members[1]
	if m.State != engine.MemberRebuilding || m.RebuildOffset < 7*2048 || m.RebuildOffset >= b.Engine.Geo.MemberSectors {
		t.Fatalf("assembled role 1 as %+v", m)
	}
	// The first superblock write after assembly (the daemon marks the
	// array in use) keeps the checkpoint.
	if err := b.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if off := superblockOf(t, paths[0]).Roles[1].RecoveryOffset; off != m.RebuildOffset {
		t.Fatalf("superblock written after assembly records recovery offset %d, want %d", off, m.RebuildOffset)
	}
	var started uint64 = 1 << 63
	b.SetSyncLog(func(msg string, r SyncReport, err error) {
		if msg == "sync started" {
			started = r.Position
		}
	})
	b.StartBackground()
	b.WaitSync()
	if s := b.SyncStatus(); s.LastAction != "rebuild" || s.LastResult != "ok" {
		t.Fatalf("resumed rebuild: %+v", s)
	}
	if started != m.RebuildOffset {
		t.Fatalf("rebuild resumed at %d, want %d", started, m.RebuildOffset)
	}
	if st := b.Status(); st.ActiveDisks != 2 {
		t.Fatalf("after the resumed rebuild: %+v", st)
	}
	if !bytes.Equal(dataOf(t, b, paths[0]), dataOf(t, b, paths[2])) {
		t.Fatal("copies differ after the resumed rebuild")
	}
	if sb := superblockOf(t, paths[2]); sb.Roles[1].State != engine.RoleActive {
		t.Fatalf("rebuilt role recorded as %v", sb.Roles[1].State)
	}
}
