package array

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
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

// A write below a rebuild's position whose bitmap block the last in-sync
// copy failed to take (while the rebuilding member took it) is not issued
// at all: were it issued, the rebuilding member could take data that the
// last copy's bitmap does not record, and the copies differ where no copy
// trusted at the next assembly says so. It used to be issued, and
// assembly read the in-sync members' copies only: the region was clean,
// the copies stayed different (found by the array model: "array sector 6
// differs between /m0 and /m3"); assembly now also reads the rebuilding
// members' copies, and the write fails unissued (md fails writes once its
// last device failed a bitmap write). The rebuild and resync then end
// with the copies equal.
func TestBitmapWriteFailedOnLastCopyDuringRebuild(t *testing.T) {
	paths := memberFiles(t, 3, 32<<20)
	gate := newGateRW(8)
	memberRW = gate.rw
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 2048}, true)
	if err != nil {
		t.Fatal(err)
	}
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
	a.WaitSync()
	if m := a.Engine.State().Members[1]; m.State != engine.MemberRebuilding || m.RebuildOffset < 2048 {
		t.Fatalf("role 1 is %+v, want rebuilding past region 0", m)
	}

	// Role 0's bitmap blocks (not its header) fail from now on.
	header := int64(a.SBs[0].BitmapOffset)
	orig := writeBitmapBlock
	t.Cleanup(func() { writeBitmapBlock = orig })
	a.fl.do(func() { // on the flusher's goroutine, which calls it
		writeBitmapBlock = func(m *Member, data []byte, off int64) error {
			if m.Path == paths[0] && off != header {
				return errors.New("injected bitmap write error")
			}
			return orig(m, data, off)
		}
	})
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	buf := bytes.Repeat([]byte{0xab}, 4096)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 8, Sectors: 8, Buf: buf})
	deadline := time.Now().Add(10 * time.Second)
	for _, ok := r.done[0]; !ok && len(r.pending) == 0 && time.Now().Before(deadline); _, ok = r.done[0] {
		time.Sleep(time.Millisecond) // the bitmap tries to make the region dirty first
		h.OnWake()
	}
	if len(r.pending) != 0 {
		t.Fatalf("the write was issued as %+v, though the last copy did not take its bitmap block", r.pending)
	}
	if err, ok := r.done[0]; !ok || !errors.Is(err, errBitmapWrite) {
		t.Fatalf("write: done %v, err %v (want the bitmap write error)", ok, err)
	}
	a.Close()
	writeBitmapBlock = orig

	b, err := Open([]string{paths[0], paths[2]}, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.StartBackground()
	b.WaitSync()
	b.WaitSync()
	if s := b.SyncStatus(); s.LastResult != "ok" {
		t.Fatalf("jobs after assembly: %+v", s)
	}
	if !bytes.Equal(dataOf(t, b, paths[0]), dataOf(t, b, paths[2])) {
		t.Fatal("copies differ after the rebuild and the resync")
	}
}
