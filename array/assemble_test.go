package array

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Tests of the trust rules of assembly and re-add (issue "Trust under
// every fault"), on file-backed members. Data writes are simulated the way
// the executor does them: StartWrite (the region durably dirty first),
// the write to the members the current state says are writable, EndWrite.

const testRegion = 1 << 11 // 1 MiB regions

// userWrite writes n bytes of pattern at array byte off (raid1) to every
// writable member, bracketed by the bitmap like a user write.
func userWrite(t *testing.T, a *Array, paths []string, off int64, n int, pattern byte) {
	t.Helper()
	first, last := a.Bitmap.Regions(uint64(off)>>9, uint64(n)>>9)
	if !a.Bitmap.StartWrite(first, last, 0) {
		a.fl.do(func() {}) // the flusher commits the set request after it
		a.fl.do(func() {})
	}
	st := a.Engine.State()
	for r, m := range st.Members {
		if writable(m) {
			scribble(t, a, paths[r], off, n, pattern)
		}
	}
	a.Bitmap.EndWrite(first, last)
}

// stop stops a like the daemon does: clean superblocks, closed.
func stop(t *testing.T, a *Array) {
	t.Helper()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
}

// run assembles paths like the daemon (the array in use: superblocks
// written not clean).
func run(t *testing.T, paths []string, spec CreateSpec) *Array {
	t.Helper()
	a, err := Open(paths, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		a.Close()
		t.Fatal(err)
	}
	return a
}

func newRAID1(t *testing.T, paths []string) *Array {
	t.Helper()
	a, err := Open(paths, CreateSpec{Name: "t", Level: engine.Level1, AssumeClean: true, RegionSectors: testRegion}, true)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func fileBytes(t *testing.T, paths ...string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestReAddAfterRoleRefilledRebuildsAll (issue #2): B fails; C replaces it
// and is rebuilt; the idle regions go clean; C fails and is removed; re-add
// of B must not copy only what was written since C failed: B missed the
// writes made while it was away, whose regions are clean now.
func TestReAddAfterRoleRefilledRebuildsAll(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a := newRAID1(t, paths[:2])
	defer a.Close()
	failAndRemove(t, a, 1)
	userWrite(t, a, paths, 2<<20, 4096, 0x5a) // B misses it
	if err := a.Replace(1, paths[2]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if st := a.Status(); st.ActiveDisks != 2 {
		t.Fatalf("after replace: %+v", st)
	}
	// A clean stop clears every idle region, the written one too.
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if r, _ := a.Bitmap.Regions(4096, 8); a.Bitmap.Dirty(r) {
		t.Fatal("the written region is still dirty after a clean stop")
	}
	failAndRemove(t, a, 1)
	userWrite(t, a, paths, 8<<20, 4096, 0x66)
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if s := a.SyncStatus(); s.LastResult != "ok" || a.Status().ActiveDisks != 2 {
		t.Fatalf("after re-add: %+v, %+v", s, a.Status())
	}
	if d0, d1 := dataOf(t, a, paths[0]), dataOf(t, a, paths[1]); !bytes.Equal(d0, d1) {
		t.Fatalf("re-added member differs: byte at 2 MiB is %#x, want %#x", d1[2<<20], d0[2<<20])
	}
	// It keeps its own member UUID: the device that held the role
	// meanwhile is not taken for it.
	if superblockOf(t, paths[1]).MemberUUID == superblockOf(t, paths[2]).MemberUUID {
		t.Fatal("the re-added member took the replaced device's UUID")
	}
}

// TestReAddCopiesWriteRacingReAdd (issue #3): a write to a clean region
// committed after re-add looked at the bitmap but planned before the
// member was writable reaches only the old members; the rebuild must copy
// it. The write is made while the re-add writes its superblocks (after
// the old code's snapshot of the dirty regions, before the rebuild); it is
// planned without the returning member, as a queue that planned it just
// before the member became writable does.
func TestReAddCopiesWriteRacingReAdd(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	defer a.Close()
	failAndRemove(t, a, 1)
	userWrite(t, a, paths, 1<<20, 4096, 0x11)
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	var once sync.Once
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == paths[1] {
			once.Do(func() {
				first, last := a.Bitmap.Regions(6<<11, 8)
				if !a.Bitmap.StartWrite(first, last, 0) {
					a.fl.do(func() {})
					a.fl.do(func() {})
				}
				scribble(t, a, paths[0], 6<<20, 4096, 0x77) // role 0 only
				a.Bitmap.EndWrite(first, last)
			})
		}
		return orig(m, b)
	}
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	writeSuperblock = orig
	if s := a.SyncStatus(); s.LastResult != "ok" {
		t.Fatalf("rebuild: %+v", s)
	}
	d0, d1 := dataOf(t, a, paths[0]), dataOf(t, a, paths[1])
	if d1[1<<20] != 0x11 {
		t.Fatal("the write made while the member was away was not copied")
	}
	if d1[6<<20] != 0x77 {
		t.Fatalf("the write racing the re-add was not copied: %#x, want 0x77", d1[6<<20])
	}
	if !bytes.Equal(d0, d1) {
		t.Fatal("members differ after the rebuild")
	}
}

// TestAssembleTornSuperblockWrite (issue #6): a crash between the members'
// superblock writes leaves one a generation behind; assembly still trusts
// it (one event of slack) instead of dropping it as stale.
func TestAssembleTornSuperblockWrite(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	old := fileBytes(t, paths[1])[0][engine.SuperblockOffset : engine.SuperblockOffset+engine.SuperblockSize]
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// The last generation reached paths[0] only.
	f, err := os.OpenFile(paths[1], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(old, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Degraded() {
		t.Fatalf("a member one generation behind was dropped: %+v", b.Engine.State().Members)
	}
}

// splitBrain makes a raid1 of paths[0] and paths[1] and, as in issue #10,
// stops it, runs each member alone with a write of its own (P2 on
// paths[0], P3 on paths[1]), and stops.
func splitBrain(t *testing.T, paths []string) {
	t.Helper()
	a := newRAID1(t, paths[:2])
	userWrite(t, a, paths, 0, 8<<20, 0x01) // P1
	stop(t, a)
	a = run(t, paths[:1], CreateSpec{})
	userWrite(t, a, paths, 4<<20, 4<<20, 0x02) // P2
	stop(t, a)
	a = run(t, paths[1:2], CreateSpec{})
	userWrite(t, a, []string{"", paths[1]}, 0, 4<<20, 0x03) // P3
	stop(t, a)
}

// TestReAddAfterSplitBrainRefused (issue #10): after a split brain, the
// two sides given together are refused, and so is the re-add of one side
// into the other (it would copy only one side's dirty regions, leaving a
// mix of P1 and P3).
func TestReAddAfterSplitBrainRefused(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	splitBrain(t, paths)
	before := fileBytes(t, paths...)
	if _, err := Open(paths, CreateSpec{}, false); err == nil {
		t.Fatal("assembly of both sides succeeded")
	} else if !errors.Is(err, engine.ErrSplitBrain) {
		t.Errorf("assembly of both sides: %v, want a split brain", err)
	}
	if !slices2DEqual(before, fileBytes(t, paths...)) {
		t.Fatal("the refused assembly wrote to the members")
	}
	a := run(t, paths[:1], CreateSpec{})
	defer a.Close()
	err := a.ReAdd(paths[1])
	if err == nil || !strings.Contains(err.Error(), "split brain") {
		t.Fatalf("re-add of the other side: %v, want a split-brain refusal", err)
	}
	if got := fileBytes(t, paths[1])[0]; !bytes.Equal(got, before[1]) {
		t.Fatal("the refused re-add wrote to the member")
	}
	if st := a.Engine.State().Members[1].State; st != engine.MemberMissing && st != engine.MemberFaulty {
		t.Fatalf("role 1 is %s after the refused re-add", st)
	}
}

func slices2DEqual(a, b [][]byte) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// TestAssembleFailedMemberOutvotesSurvivor (issue #9): raid1 of vdc+vdd;
// vdd is failed, writes reach vdc only; vdd is then started alone twice
// (forced: see TestLoneFailedMemberRefused; its events pass vdc's). Given both, assembly must not drop vdc as
// stale and serve vdd's old data: refused as a split brain; --force keeps
// the freshest side and rebuilds the other from it in full.
func TestAssembleFailedMemberOutvotesSurvivor(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	userWrite(t, a, paths, 0, 4096, 0xcc) // vdc only
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	stop(t, a)
	// vdd's own superblock records its failure: started alone only with
	// --force (TestLoneFailedMemberRefused); then it runs on its own.
	for _, force := range []bool{true, false} {
		stop(t, run(t, paths[1:], CreateSpec{Force: force}))
	}
	if c, d := superblockOf(t, paths[0]).Events, superblockOf(t, paths[1]).Events; d <= c {
		t.Fatalf("the failed member's events %d are not past the survivor's %d", d, c)
	}
	before := fileBytes(t, paths...)
	_, err := Open(paths, CreateSpec{}, false)
	if !errors.Is(err, engine.ErrSplitBrain) || !strings.Contains(err.Error(), paths[0]) || !strings.Contains(err.Error(), paths[1]) ||
		!strings.Contains(err.Error(), "--force") {
		t.Fatalf("assembly: %v, want a split brain naming both members and --force", err)
	}
	if !slices2DEqual(before, fileBytes(t, paths...)) {
		t.Fatal("the refused assembly wrote to the members")
	}
	// Forced: the freshest (vdd) is authoritative, vdc is rebuilt from it.
	b, err := Open(paths, CreateSpec{Force: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st := b.Engine.State()
	if st.Members[1].State != engine.MemberActive || st.Members[0].State != engine.MemberRebuilding {
		t.Fatalf("forced assembly: %+v", st.Members)
	}
	b.StartBackground()
	b.WaitSync()
	if s := b.SyncStatus(); s.LastResult != "ok" {
		t.Fatalf("rebuild: %+v", s)
	}
	if d0, d1 := dataOf(t, b, paths[0]), dataOf(t, b, paths[1]); !bytes.Equal(d0, d1) {
		t.Fatal("members differ after the forced rebuild")
	}
	if st := b.Engine.State(); st.Members[0].State != engine.MemberActive {
		t.Fatalf("after the rebuild: %+v", st.Members)
	}
}

// TestLoneFailedMemberRefused (issue #9, first step): a member failed by
// hand and removed, given alone, must not start the array from its stale
// data: its own superblock records the failure, so it is refused without
// --force, in one line naming it and the way to force it.
func TestLoneFailedMemberRefused(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	userWrite(t, a, paths, 0, 4096, 0xcc) // vdc only
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	stop(t, a)
	before := fileBytes(t, paths[1])
	_, err := Open(paths[1:], CreateSpec{}, false)
	if err == nil {
		t.Fatal("the failed member alone was assembled")
	}
	if !errors.Is(err, engine.ErrFailedMember) || !strings.Contains(err.Error(), "add --force "+paths[1]) ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("assembly of the failed member: %v", err)
	}
	if !slices2DEqual(before, fileBytes(t, paths[1])) {
		t.Fatal("the refused assembly wrote to the member")
	}
	// With the survivor: it is stale, the survivor serves.
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if st := b.Engine.State().Members; st[0].State != engine.MemberActive || st[1].State == engine.MemberActive {
		t.Fatalf("assembly of both: %+v", st)
	}
	b.Close()
	// Forced, alone: it serves.
	c, err := Open(paths[1:], CreateSpec{Force: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st := c.Engine.State().Members; st[1].State != engine.MemberActive {
		t.Fatalf("forced assembly: %+v", st)
	}
}

// TestReAddAfterFailedRebuildRebuildsAll: a member that failed while
// being rebuilt (a replacement here) holds current data only where the
// rebuild reached; its superblock says it was rebuilding, so a re-add
// must copy every written region, not only the dirty ones.
func TestReAddAfterFailedRebuildRebuildsAll(t *testing.T) {
	var writes atomic.Int32
	old := memberRW
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		if write && p != nil && writes.Add(1) == 3 {
			return syscall.EIO // the rebuild target fails part-way
		}
		return deviceRW(d, p, off, write)
	}
	defer func() { memberRW = old }()
	paths := memberFiles(t, 3, 16<<20)
	a := newRAID1(t, paths[:2])
	defer a.Close()
	n := int(a.Engine.Geo.MemberSectors << 9)
	scribble(t, a, paths[0], 0, n, 0xab)
	scribble(t, a, paths[1], 0, n, 0xab)
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(1, paths[2]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if st := a.Engine.State().Members[1].State; st != engine.MemberFaulty {
		t.Fatalf("the rebuild target is %s after its write error", st)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	if err := a.ReAdd(paths[2]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if st := a.Status(); st.ActiveDisks != 2 {
		t.Fatalf("after re-add: %+v", st)
	}
	if d0, d2 := dataOf(t, a, paths[0]), dataOf(t, a, paths[2]); !bytes.Equal(d0, d2) {
		i := 0
		for i < len(d0) && d0[i] == d2[i] {
			i++
		}
		t.Fatalf("re-added member differs from byte %d: %#x, want %#x", i, d2[i], d0[i])
	}
}

// TestReAddOldCopyRebuildsAll: md's events_cleared rule, for a member
// this run last wrote: an old copy of it (its superblock older than the
// last one written to it) missed writes whose regions were cleared since,
// so a re-add copies every written region.
func TestReAddOldCopyRebuildsAll(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	defer a.Close()
	image := fileBytes(t, paths[1])[0] // an old copy of member 1
	userWrite(t, a, paths, 3<<20, 4096, 0x3c)
	// A clean stop and start: the region is cleared, generations pass.
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	failAndRemove(t, a, 1)
	if err := os.WriteFile(paths[1], image, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.ReAdd(paths[1]); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	if d0, d1 := dataOf(t, a, paths[0]), dataOf(t, a, paths[1]); !bytes.Equal(d0, d1) {
		t.Fatalf("re-added old copy differs: byte at 3 MiB is %#x, want %#x", d1[3<<20], d0[3<<20])
	}
}

// putSuperblock writes sb as path's superblock.
func putSuperblock(t *testing.T, path string, sb *engine.Superblock) {
	t.Helper()
	b, err := sb.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
}

// Members assembled one event apart (the slack for a torn update) may
// remember a role nobody holds here differently; the next generation
// gives them one role table all the same. (The array model found two
// members of one generation disagreeing on a missing role's member: the
// next assembly refused the array as inconsistent.)
func TestOneRoleTablePerGeneration(t *testing.T) {
	paths := memberFiles(t, 3, 32<<20)
	stop(t, newRAID1(t, paths))
	// Member 1 is a generation behind and knew another device in role 2.
	sb := superblockOf(t, paths[1])
	sb.Events--
	sb.Roles[2].Member[0] ^= 0xff
	putSuperblock(t, paths[1], sb)
	a := run(t, paths[:2], CreateSpec{})
	stop(t, a)
	s0, s1 := superblockOf(t, paths[0]), superblockOf(t, paths[1])
	if s0.Events != s1.Events {
		t.Fatalf("events %d and %d after a clean stop", s0.Events, s1.Events)
	}
	for i := range 3 {
		if s0.Roles[i] != s1.Roles[i] {
			t.Fatalf("generation %d: role %d is %+v on member 0, %+v on member 1", s0.Events, i, s0.Roles[i], s1.Roles[i])
		}
	}
	b, err := Open(paths[:2], CreateSpec{}, false)
	if err != nil {
		t.Fatalf("assembly after that: %v", err)
	}
	b.Close()
}

// A re-add reads the member's superblock: one that puts the data or the
// bitmap elsewhere than the array does, or describes another geometry,
// is refused as assembly refuses it (corrupt or crafted), and so is one
// its device cannot hold. Accepted, its data would be taken to be where
// the array's is, and with a bitmap only the dirty regions copied.
func TestReAddRefusesSuperblockAtOddsWithTheArray(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	defer a.Close()
	failAndRemove(t, a, 1)
	good := superblockOf(t, paths[1])
	for _, tc := range []struct {
		name  string
		craft func(sb *engine.Superblock)
	}{
		{"data offset", func(sb *engine.Superblock) {
			sb.DataOffset += engine.DataOffsetAlign
			sb.DataSectors -= engine.DataOffsetAlign >> 9
		}},
		{"chunk", func(sb *engine.Superblock) { sb.ChunkSectors = 8 }},
		{"data past the device", func(sb *engine.Superblock) { sb.DataSectors += 1 << 20 }},
	} {
		sb := *good
		tc.craft(&sb)
		putSuperblock(t, paths[1], &sb)
		before, events := contents(t, paths...), a.Status().Events
		if err := a.ReAdd(paths[1]); err == nil {
			t.Errorf("%s: re-add of a member whose superblock is at odds with the array succeeded", tc.name)
			a.WaitSync()
			if err := a.Fail(1); err != nil {
				t.Fatal(err)
			}
			if err := a.Remove(1); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if st := a.Status(); st.Events != events || st.Members[1].State != "missing" {
			t.Errorf("%s: refused re-add changed the array: %+v", tc.name, st)
		}
		unchanged(t, tc.name+": refused re-add", paths, before)
	}
}

// A failed member whose disk is gone (pulled before anyone removed it) no
// longer keeps the array from starting: the superblocks present record it
// failed, so the array assembles without it, as md's does. A member they
// record active that is absent may hold the freshest data: the assembly is
// refused with nothing written.
func TestAbsentMemberLeftOutOnlyIfRecordedFailed(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a := newRAID1(t, paths)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	userWrite(t, a, paths, 0, 4096, 0xcd)
	stop(t, a)
	if err := os.Remove(paths[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(paths, CreateSpec{}, false); err == nil {
		t.Fatal("assembled with a member path absent, without SkipAbsent")
	}
	b, err := Open(paths, CreateSpec{SkipAbsent: true}, false)
	if err != nil {
		t.Fatalf("assembly without the absent failed member: %v", err)
	}
	if len(b.Absent) != 1 || b.Absent[0] != paths[2] {
		t.Fatalf("Absent = %v, want [%s]", b.Absent, paths[2])
	}
	if st := b.Engine.State().Members; st[0].State != engine.MemberActive || st[1].State != engine.MemberActive || st[2].State == engine.MemberActive {
		t.Fatalf("assembly without the failed member: %+v", st)
	}
	b.Close()

	// All three active when stopped; one disk gone since.
	paths = memberFiles(t, 3, 16<<20)
	a = newRAID1(t, paths)
	stop(t, a)
	if err := os.Remove(paths[1]); err != nil {
		t.Fatal(err)
	}
	before := fileBytes(t, paths[0], paths[2])
	_, err = Open(paths, CreateSpec{SkipAbsent: true}, false)
	if !errors.Is(err, ErrMemberAbsent) || !strings.Contains(err.Error(), paths[1]) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("assembly with an active member absent: %v, want ErrMemberAbsent naming %s in one line", err, paths[1])
	}
	if !slices2DEqual(before, fileBytes(t, paths[0], paths[2])) {
		t.Fatal("the refused assembly wrote to the members present")
	}
	// None present.
	for _, p := range paths {
		os.Remove(p)
	}
	if _, err := Open(paths, CreateSpec{SkipAbsent: true}, false); !errors.Is(err, ErrMemberAbsent) {
		t.Fatalf("assembly with every member absent: %v, want ErrMemberAbsent", err)
	}
}

// failAndRemove fails role and removes its member, as `fail` then
// `remove` do.
func failAndRemove(t *testing.T, a *Array, role int) {
	t.Helper()
	if err := a.Fail(role); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(role); err != nil {
		t.Fatal(err)
	}
}

// TestForceSplitBrainSameEvents: raid1 A, B; each side started alone as
// often (the common split brain: both at the same events). The refusal
// says --force keeps the first side given and rebuilds the other in full;
// it must do so, not refuse the array as inconsistent.
func TestForceSplitBrainSameEvents(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	splitBrain(t, paths)
	if ea, eb := superblockOf(t, paths[0]).Events, superblockOf(t, paths[1]).Events; ea != eb {
		t.Fatalf("sides at events %d and %d, want the same", ea, eb)
	}
	_, err := Open(paths, CreateSpec{}, false)
	if !errors.Is(err, engine.ErrSplitBrain) {
		t.Fatalf("assembly: %v, want a split brain", err)
	}
	a, err := Open(paths, CreateSpec{Force: true}, false)
	if err != nil {
		t.Fatalf("forced assembly of a split brain (the refusal's advice): %v", err)
	}
	defer a.Close()
	st := a.Engine.State()
	if st.Members[0].State != engine.MemberActive || st.Members[1].State != engine.MemberRebuilding {
		t.Fatalf("forced assembly: %+v", st.Members)
	}
	a.StartBackground()
	a.WaitSync()
	if s := a.SyncStatus(); s.LastResult != "ok" || a.Status().ActiveDisks != 2 {
		t.Fatalf("rebuild: %+v, %+v", s, a.Status())
	}
	if d0, d1 := dataOf(t, a, paths[0]), dataOf(t, a, paths[1]); !bytes.Equal(d0, d1) {
		t.Fatalf("after the forced rebuild the copies differ: byte 0 %#x vs %#x", d0[0], d1[0])
	}
}

// TestForceAssemblyDoesNotTrustSelfFailedMember: raid1 A, B; A is failed
// by hand (its superblock records that at the survivor's generation), a
// write reaches B only, then a power cut. Assembled with --force, A
// given first, A must not be made active beside B: the resync of the
// write's dirty region would copy A's old data over B's.
func TestForceAssemblyDoesNotTrustSelfFailedMember(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	userWrite(t, a, paths, 1<<20, 4096, 0x11)
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	userWrite(t, a, paths, 1<<20, 4096, 0x22) // B only
	a.Close()                                 // a power cut: no clean stop
	if ea, eb := superblockOf(t, paths[0]).Events, superblockOf(t, paths[1]).Events; ea != eb {
		t.Fatalf("events %d, %d: want A's failure record at B's generation", ea, eb)
	}
	b, err := Open(paths, CreateSpec{Force: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if st := b.Engine.State().Members; st[0].State == engine.MemberActive {
		t.Errorf("the member recorded failed is trusted active: %+v", st)
	}
	b.StartBackground()
	b.WaitSync()
	if s := b.SyncStatus(); s.LastResult != "ok" || b.Status().ActiveDisks != 2 {
		t.Fatalf("after the forced assembly: %+v, %+v", s, b.Status())
	}
	for i, p := range paths {
		if d := dataOf(t, b, p); d[1<<20] != 0x22 {
			t.Errorf("member %d holds %#x at 1 MiB, want the write made after the failure (0x22)", i, d[1<<20])
		}
	}
}
