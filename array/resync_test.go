package array

import (
	"bytes"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
)

// fill returns n bytes of a pattern seeded by seed.
func fill(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed ^ byte(i>>9) ^ byte(i*13)
	}
	return p
}

// crashNoBitmap makes a raid1 without a bitmap whose copies differ and
// that was not stopped cleanly (the daemon marks it in use, then dies).
func crashNoBitmap(t *testing.T, n int, size int64) []string {
	t.Helper()
	paths := memberFiles(t, n, size)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	sz := int(a.Engine.Geo.MemberSectors << 9)
	for i, p := range paths {
		scribbleBytes(t, a, p, 0, fill(sz, byte(0x10*i+1)))
	}
	a.Close() // no SetClean(true): a crash
	return paths
}

// An array without a bitmap that was not stopped cleanly is resynced in
// full at assembly (as md). It used to be left with differing copies.
func TestUncleanArrayWithoutBitmapResyncs(t *testing.T) {
	paths := crashNoBitmap(t, 2, 16<<20)
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SetClean(false); err != nil { // the daemon marks it in use first
		t.Fatal(err)
	}
	if s := b.SyncStatus(); !s.ResyncNeeded {
		t.Fatalf("unclean array without a bitmap: %+v", s)
	}
	b.StartBackground()
	b.WaitSync()
	if s := b.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
		t.Fatalf("after the resync: %+v", s)
	}
	if !bytes.Equal(dataOf(t, b, paths[0]), dataOf(t, b, paths[1])) {
		t.Fatal("copies differ after the resync")
	}
	if err := b.SetClean(true); err != nil {
		t.Fatal(err)
	}
	if sb := superblockOf(t, paths[0]); !sb.Clean || sb.ResyncOffset != 0 {
		t.Fatalf("clean stop after the resync: clean %v resync offset %d", sb.Clean, sb.ResyncOffset)
	}
}

// A full resync stopped part-way (del) records where it got to and resumes
// there at the next assembly; a crash while it runs starts it again from
// the beginning (writes in flight may have reached one copy only).
func TestFullResyncResumes(t *testing.T) {
	paths := crashNoBitmap(t, 2, 32<<20)
	gate := newGateRW(4)
	memberRW = gate.rw
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if sb := superblockOf(t, paths[0]); sb.Clean || sb.ResyncOffset != 0 {
		t.Fatalf("running: clean %v resync offset %d", sb.Clean, sb.ResyncOffset)
	}
	a.StartBackground()
	<-gate.reached
	stopJob(a)
	close(gate.release)
	a.StopSync()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	memberRW = deviceRW
	sb := superblockOf(t, paths[1])
	if sb.Clean || sb.ResyncOffset < 4*2048 || sb.ResyncOffset >= a.Engine.Geo.ArraySectors() {
		t.Fatalf("stopped during the resync: clean %v resync offset %d", sb.Clean, sb.ResyncOffset)
	}
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	started := ^uint64(0)
	b.SetSyncLog(func(msg string, r SyncReport, err error) {
		if msg == "sync started" {
			started = r.Position
		}
	})
	if err := b.SetClean(false); err != nil {
		t.Fatal(err)
	}
	b.StartBackground()
	b.WaitSync()
	if s := b.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" {
		t.Fatalf("resumed resync: %+v", s)
	}
	if started != sb.ResyncOffset {
		t.Fatalf("resync resumed at %d, want %d", started, sb.ResyncOffset)
	}
	if !bytes.Equal(dataOf(t, b, paths[0]), dataOf(t, b, paths[1])) {
		t.Fatal("copies differ after the resumed resync")
	}
}

// dirtyCrash makes a raid1 with a bitmap whose region 0 (2 MiB) is dirty
// with different data on every member, as after a crash during a write.
func dirtyCrash(t *testing.T, n int) ([]string, int) {
	t.Helper()
	paths := memberFiles(t, n+1, 32<<20)
	a, err := Open(paths[:n], CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 4096}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	first, last := a.Bitmap.Regions(0, 4096)
	if !a.Bitmap.StartWrite(first, last, 0) {
		a.fl.do(func() {})
		a.fl.do(func() {})
	}
	for i, p := range paths[:n] {
		scribbleBytes(t, a, p, 0, fill(2<<20, byte(0x20*i+3)))
	}
	a.Close() // the write never ended: a crash
	return paths, first
}

// A resync stopped by a member error runs again without the member: the
// other copies still differ. It used to be dropped, the regions never
// resynced nor cleared.
func TestResyncRetriedAfterMemberError(t *testing.T) {
	paths, region := dirtyCrash(t, 3)
	var bad atomic.Pointer[Member]
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		if m := bad.Load(); write && p != nil && m != nil && d == m.Device {
			return unix.EIO
		}
		return deviceRW(d, p, off, write)
	}
	t.Cleanup(func() { memberRW = deviceRW })
	b, err := Open(paths[:3], CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !b.Bitmap.NeedsSync(region) {
		t.Fatal("the dirty region does not need a resync")
	}
	bad.Store(b.Members[2])
	b.StartBackground()
	b.WaitSync()
	if st := b.Status(); st.Members[2].State != "faulty" {
		t.Fatalf("member that failed the resync's write: %+v", st.Members[2])
	}
	if s := b.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
		t.Fatalf("after a resync stopped by a member error: %+v", s)
	}
	if !bytes.Equal(dataOf(t, b, paths[0])[:2<<20], dataOf(t, b, paths[1])[:2<<20]) {
		t.Fatal("the remaining copies differ")
	}
}

// A resync pending at assembly runs after the rebuild that assembly
// resumes first. It used to be dropped: the copies stayed different and
// the regions were never cleared.
func TestResyncRunsAfterRebuild(t *testing.T) {
	paths := memberFiles(t, 4, 32<<20)
	gate := newGateRW(2) // the sync jobs' writes
	memberRW = gate.rw
	t.Cleanup(func() { memberRW = deviceRW })
	a, err := Open(paths[:3], CreateSpec{Level: engine.Level1, AssumeClean: true, RegionSectors: 4096}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(2); err != nil {
		t.Fatal(err)
	}
	first, last := a.Bitmap.Regions(0, 4096)
	if !a.Bitmap.StartWrite(first, last, 0) {
		a.fl.do(func() {})
		a.fl.do(func() {})
	}
	scribbleBytes(t, a, paths[0], 0, fill(2<<20, 0x41))
	scribbleBytes(t, a, paths[1], 0, fill(2<<20, 0x42))
	// A new device in role 2, its rebuild stopped part-way; then a crash
	// (the write never ended, the array is not clean).
	if err := a.Replace(2, paths[3]); err != nil {
		t.Fatal(err)
	}
	<-gate.reached
	stopJob(a)
	close(gate.release)
	a.Close()
	memberRW = deviceRW

	b, err := Open([]string{paths[0], paths[1], paths[3]}, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if m := b.Engine.State().Members[2]; m.State != engine.MemberRebuilding || !b.Bitmap.NeedsSync(first) {
		t.Fatalf("assembled role 2 as %+v, region needs sync %v", m, b.Bitmap.NeedsSync(first))
	}
	var kinds []string
	var between SyncStatus
	b.SetSyncLog(func(msg string, r SyncReport, err error) {
		if msg == "sync ended" {
			kinds = append(kinds, r.Kind)
			if r.Kind == "rebuild" {
				// Between the rebuild's end and the resync's start:
				// the status must say a job may follow (detail --wait
				// returned here and a check was refused).
				between = b.SyncStatus()
			}
		}
	})
	b.StartBackground()
	b.WaitSync()
	if s := b.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded || s.Settling {
		t.Fatalf("after the rebuild (jobs %v): %+v", kinds, s)
	}
	if between.Action == "idle" && !between.Settling {
		t.Fatalf("between the rebuild and the resync the status said idle and settled: %+v", between)
	}
	if st := b.Status(); st.ActiveDisks != 3 {
		t.Fatalf("after the rebuild: %+v", st)
	}
	d0 := dataOf(t, b, paths[0])[:2<<20]
	if !bytes.Equal(d0, dataOf(t, b, paths[1])[:2<<20]) || !bytes.Equal(d0, dataOf(t, b, paths[3])[:2<<20]) {
		t.Fatal("copies of the region that needed a resync differ")
	}
}

// A new array without a bitmap has no record of what was written, so it
// syncs in full from the start, as md does; --assume-clean skips that.
func TestNewArrayWithoutBitmapSyncs(t *testing.T) {
	for _, assumeClean := range []bool{false, true} {
		paths := memberFiles(t, 2, 16<<20)
		a, err := Open(paths, CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: assumeClean}, true)
		if err != nil {
			t.Fatal(err)
		}
		sz := int(a.Engine.Geo.MemberSectors << 9)
		for i, p := range paths {
			scribbleBytes(t, a, p, 0, fill(sz, byte(0x10*i+1))) // the devices' old contents
		}
		if err := a.SetClean(false); err != nil {
			t.Fatal(err)
		}
		if s := a.SyncStatus(); s.ResyncNeeded == assumeClean {
			t.Fatalf("assume clean %v: %+v", assumeClean, s)
		}
		a.StartBackground()
		a.WaitSync()
		if err := a.Check(false); err != nil {
			t.Fatal(err)
		}
		a.WaitSync()
		s := a.SyncStatus()
		if s.LastAction != "check" || s.LastResult != "ok" {
			t.Fatalf("assume clean %v: check: %+v", assumeClean, s)
		}
		if want := s.MismatchCnt != 0; want != assumeClean {
			t.Fatalf("assume clean %v: check counted %d mismatches", assumeClean, s.MismatchCnt)
		}
		a.Close()
	}
}

// A rebuild does not wait for a running resync (a new array's initial
// sync may take hours): the resync gives way and resumes after it, as
// md's does. replace used to be refused until the resync ended.
func TestRebuildPreemptsResync(t *testing.T) {
	paths := memberFiles(t, 4, 8<<20)
	a, err := Open(paths[:3], CreateSpec{Level: engine.Level1, NoBitmap: true, SyncMaxBytes: 4 << 20}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sz := int(a.Engine.Geo.MemberSectors << 9)
	for i, p := range paths[:3] {
		scribbleBytes(t, a, p, 0, fill(sz, byte(0x10*i+1)))
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	a.StartBackground()
	if s := a.SyncStatus(); s.Action != "resync" {
		t.Fatalf("no initial resync: %+v", s)
	}
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(2, paths[3]); err != nil {
		t.Fatalf("replace during the initial resync: %v", err)
	}
	if s := a.SyncStatus(); s.Action != "rebuild" {
		t.Fatalf("the rebuild does not run first: %+v", s)
	}
	a.WaitSync()
	s := a.SyncStatus()
	if s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
		t.Fatalf("the resync did not resume after the rebuild: %+v", s)
	}
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if s := a.SyncStatus(); s.LastResult != "ok" || s.MismatchCnt != 0 {
		t.Fatalf("check: %+v", s)
	}
}
