package array

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A raid10 write that fails on a member kept as the last in-sync copy of
// other chunks reached the other copy of its own chunk: the two copies
// differ. Reads of the range then answer from one chosen copy, and a
// resync makes the copies equal. (The array model found the copies left
// different, in sync, with no resync: reads answered either.)
func TestRAID10WriteFailedOnLastCopyResyncs(t *testing.T) {
	for _, bm := range []bool{true, false} {
		name := "bitmap"
		if !bm {
			name = "no bitmap"
		}
		t.Run(name, func(t *testing.T) { testWriteFailedOnLastCopy(t, bm) })
	}
}

func testWriteFailedOnLastCopy(t *testing.T, withBitmap bool) {
	paths := memberFiles(t, 3, 16<<20)
	// n2 on 3 members, 8 KiB chunks: chunk 0 on roles 0 and 1, chunk 1
	// on roles 2 and 0, chunk 2 on roles 1 and 2.
	spec := CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 16, AssumeClean: true,
		RegionSectors: 128, NoBitmap: !withBitmap}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.StartBackground()
	// Role 1 fails: role 0 holds the last copy of chunk 0, role 2 of
	// chunk 2; chunk 1 keeps both its copies.
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	r := &fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}
	h := a.newQueue(r)
	const sector = 16 // chunk 1
	buf := bytes.Repeat([]byte{0xab}, 8<<10)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: sector, Sectors: 16, Buf: buf})
	deadline := time.Now().Add(10 * time.Second)
	for len(r.pending) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the bitmap makes the region dirty first
		h.OnWake()
	}
	if len(r.pending) != 2 {
		t.Fatalf("the write was planned as %+v", r.pending)
	}
	ops := r.pending
	r.pending = nil
	for _, o := range ops {
		if o.io.Member == 2 {
			// The device takes it.
			f, err := os.OpenFile(paths[2], os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(o.data, int64(a.dataOffset+o.io.Sector<<9)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			h.OnCompletion(o.ud, int32(len(o.data)))
		} else {
			h.OnCompletion(o.ud, -5) // EIO on role 0, the last copy of chunk 0
		}
	}
	if err, ok := r.done[0]; !ok || err == nil {
		t.Fatalf("write: done %v, err %v (want an error)", ok, err)
	}
	if s := a.Engine.State().Members[0].State; s != engine.MemberActive {
		t.Fatalf("role 0, the last copy of chunk 0, is %v", s)
	}
	// Until the copies are equal, every read of the range answers from
	// the same copy.
	var seen []int32
	for range 4 {
		h.Handle(&ublk.Request{Tag: 1, Op: ublk.IOOpRead, Sector: sector, Sectors: 16, Buf: make([]byte, 8<<10)})
		for len(r.pending) == 0 && time.Now().Before(deadline) {
			// (parked behind a resync step of the range)
			time.Sleep(time.Millisecond)
			h.OnWake()
		}
		if len(r.pending) != 1 {
			t.Fatalf("the read was planned as %+v", r.pending)
		}
		if a.needsResync() {
			// (planned before the resync made the copies equal)
			seen = append(seen, r.pending[0].io.Member)
		}
		h.OnCompletion(r.pending[0].ud, 8<<10)
		r.pending = nil
		if _, ok := r.done[1]; !ok {
			t.Fatal("the read did not complete")
		}
		delete(r.done, 1)
	}
	for _, m := range seen {
		if m != seen[0] {
			t.Fatalf("reads of the range went to members %v: answers differ between copies", seen)
		}
	}
	// The resync makes the copies equal.
	for a.needsResync() || a.sync.busy() {
		if time.Now().After(deadline) {
			t.Fatalf("no resync made the copies equal (needs resync %v, busy %v)", a.needsResync(), a.sync.busy())
		}
		time.Sleep(5 * time.Millisecond)
		h.OnWake()
	}
	off := int64(a.dataOffset + 8<<9) // chunk 1: member sector 8 on role 2, 8 on role 0
	c0 := readAt(t, paths[0], off, 8<<10)
	c2 := readAt(t, paths[2], off, 8<<10)
	if !bytes.Equal(c0, c2) {
		t.Fatalf("after the resync the copies of chunk 1 differ")
	}
}

func readAt(t *testing.T, p string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// Several members each holding the last copy of other chunks (raid10,
// degraded), one of which fails its superblock writes: the others must
// not move on at every update without it. They took the first update it
// failed, and later ones go to it first (it is behind), so no member
// falls more than one generation behind and the array assembles. (The
// array model found a hung member left two generations behind the one
// that took every update: "1 of 4 members active".)
func TestSuperblockUpdatesKeepLastCopiesTogether(t *testing.T) {
	a, paths := degradedRAID10(t)
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == paths[2] {
			return errors.New("injected write error")
		}
		return orig(m, b)
	}
	for i := range 3 {
		if err := a.SetClean(i%2 == 0); err == nil {
			t.Fatalf("update %d: no error, though the last copy of a chunk did not take it", i)
		}
	}
	writeSuperblock = orig
	a.Close()
	var evs []uint64
	for _, p := range []string{paths[0], paths[2]} {
		sb, err := engine.ParseSuperblock(readAt(t, p, engine.SuperblockOffset, engine.SuperblockSize))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, sb.Events)
	}
	if evs[0] > evs[1]+1 {
		t.Fatalf("events: role 0 at %d, role 2 at %d: more than one generation apart", evs[0], evs[1])
	}
	b, err := Open([]string{paths[0], paths[2]}, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("assembly: %v", err)
	}
	b.Close()
}

// A superblock write given up after the member timeout may still be
// carried out by the device. While it is out no other goes to the member:
// the device would carry out each given-up one, a generation newer every
// time, and the member would land generations ahead of the others (found
// by the array model on raid10: "1 of 4 members active").
func TestSuperblockWriteGivenUpIsTheLastOne(t *testing.T) {
	a, paths := degradedRAID10(t)
	a.MemberTimeout = 100 * time.Millisecond
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	var mu sync.Mutex
	var hung []chan struct{}
	done := make(chan struct{}, 16)
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path != paths[2] {
			return orig(m, b)
		}
		c := make(chan struct{})
		mu.Lock()
		hung = append(hung, c)
		mu.Unlock()
		<-c // the device hangs until the test lets it answer
		err := orig(m, b)
		done <- struct{}{}
		return err
	}
	for i := range 3 {
		if err := a.SetClean(i%2 == 0); err == nil {
			t.Fatalf("update %d: no error, though role 2 did not answer", i)
		}
	}
	mu.Lock()
	given := hung
	mu.Unlock()
	for _, c := range given { // the device answers, in order
		close(c)
		<-done
	}
	writeSuperblock = orig
	a.Close()
	ev := func(p string) uint64 {
		sb, err := engine.ParseSuperblock(readAt(t, p, engine.SuperblockOffset, engine.SuperblockSize))
		if err != nil {
			t.Fatal(err)
		}
		return sb.Events
	}
	e0, e2 := ev(paths[0]), ev(paths[2])
	if e2 > e0+1 || e0 > e2+1 {
		t.Fatalf("%d given-up superblock writes landed: role 2 at events %d, role 0 at %d", len(given), e2, e0)
	}
	b, err := Open([]string{paths[0], paths[2]}, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("assembly: %v", err)
	}
	b.Close()
}

// degradedRAID10 creates raid10 n2 on 3 file members (8 KiB chunks) and
// fails role 1: roles 0 and 2 then each hold the last copy of a chunk.
func degradedRAID10(t *testing.T) (*Array, []string) {
	t.Helper()
	paths := memberFiles(t, 3, 16<<20)
	spec := CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 16, AssumeClean: true, RegionSectors: 128}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	return a, paths
}

// An update that no superblock took must not move the generation on: a
// last copy failing its superblock writes would otherwise fall one
// generation further behind the members that took the update before it at
// every update, and the next update, which it takes first, torn by a
// power cut, would leave the members that many generations apart: beyond
// assembly's slack (found by the array model on raid10).
func TestSuperblockUpdatesNobodyTookKeepTheGeneration(t *testing.T) {
	a, paths := degradedRAID10(t)
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	failing := paths[2]
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == failing {
			return errors.New("injected write error")
		}
		return orig(m, b)
	}
	for i := range 4 {
		if err := a.SetClean(i%2 == 0); err == nil {
			t.Fatalf("update %d: no error, though the last copy of a chunk did not take it", i)
		}
	}
	// Role 2 answers again; the next update is cut after role 2 took it
	// (role 0's write fails, and so do all after it, as after a power
	// cut).
	failing = paths[0]
	if err := a.SetClean(false); err == nil {
		t.Fatal("torn update: no error, though role 0 did not take it")
	}
	a.Close()
	ev := func(p string) uint64 {
		sb, err := engine.ParseSuperblock(readAt(t, p, engine.SuperblockOffset, engine.SuperblockSize))
		if err != nil {
			t.Fatal(err)
		}
		return sb.Events
	}
	e0, e2 := ev(paths[0]), ev(paths[2])
	if e2 > e0+1 || e0 > e2+1 {
		t.Fatalf("after 4 updates role 2 did not take and one torn: role 0 at events %d, role 2 at %d", e0, e2)
	}
	writeSuperblock = orig
	b, err := Open([]string{paths[0], paths[2]}, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("assembly: %v", err)
	}
	b.Close()
}

// A superblock write the device took but failed to flush may still become
// durable: its generation is not taken again by the next update. Were it
// reused, two members could end with superblocks of one generation that
// differ, which assembly refuses as a corrupt array.
func TestSuperblockWrittenNotFlushedKeepsItsGeneration(t *testing.T) {
	a, paths := degradedRAID10(t)
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	update := 0
	writeSuperblock = func(m *Member, b []byte) error {
		switch {
		case update == 0 && m.Path == paths[0]:
			// The block lands, the flush fails.
			if err := orig(m, b); err != nil {
				return err
			}
			return fmt.Errorf("%w: injected flush error", errWrittenNotFlushed)
		case update == 0 && m.Path == paths[2], update == 1 && m.Path == paths[0]:
			return errors.New("injected write error")
		}
		return orig(m, b)
	}
	if err := a.SetClean(true); err == nil {
		t.Fatal("update 0: no error, though no last copy took it for sure")
	}
	update = 1
	if err := a.SetClean(false); err == nil {
		t.Fatal("update 1: no error, though role 0 did not take it")
	}
	writeSuperblock = func(m *Member, b []byte) error { return errors.New("power cut") }
	a.Close()
	writeSuperblock = orig
	s0, s2 := superblockOf(t, paths[0]), superblockOf(t, paths[2])
	if s0.Events == s2.Events && s0.Clean != s2.Clean {
		t.Fatalf("roles 0 and 2 both at events %d, one clean and one not", s0.Events)
	}
	b, err := Open([]string{paths[0], paths[2]}, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("assembly: %v", err)
	}
	b.Close()
}

// A superblock write to the last copy that was given up after the member
// timeout may still land: the member may then be a generation ahead of
// the others, which never took it. The next update must not give it yet
// another generation first (a crash after that write would leave the
// others two generations behind the only copy's holder, beyond
// assembly's slack, and the array could not be assembled): the given-up
// generation is made certain on it first, and the members behind take
// the next one before it. Checked at every superblock write the device
// completes, as if a power cut followed it (found by the array model:
// raid10, '1 of 4 members active').
func TestSuperblockWriteGivenUpThenNextUpdate(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20)
	spec := CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 16, AssumeClean: true, RegionSectors: 128}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(1); err != nil { // role 0 holds the last copy of its chunks
		t.Fatal(err)
	}
	a.MemberTimeout = 100 * time.Millisecond
	orig := writeSuperblock
	defer func() { writeSuperblock = orig }()
	var mu sync.Mutex // serialises the writes' checks
	var problems []string
	check := func() {
		var ms []engine.MemberSB
		for _, p := range []string{paths[0], paths[2], paths[3]} {
			sb, err := engine.ParseSuperblock(readAt(t, p, engine.SuperblockOffset, engine.SuperblockSize))
			ms = append(ms, engine.MemberSB{Path: p, SB: sb, Err: err})
		}
		asm, err := engine.Assemble(ms)
		switch {
		case err != nil:
			problems = append(problems, err.Error())
		case asm.Roles[0].State != engine.RoleActive || asm.Roles[2].State != engine.RoleActive && asm.Roles[3].State != engine.RoleActive:
			problems = append(problems, fmt.Sprintf("events %d %d %d: the copies are not all trusted",
				ms[0].SB.Events, ms[1].SB.Events, ms[2].SB.Events))
		}
	}
	release := make(chan struct{})
	landed := make(chan struct{})
	hang := true
	writeSuperblock = func(m *Member, b []byte) error {
		mu.Lock()
		h := hang && m.Path == paths[0]
		hang = hang && !h
		mu.Unlock()
		if h {
			<-release // the device hangs, then carries the write out
			defer close(landed)
		}
		err := orig(m, b)
		mu.Lock()
		check()
		mu.Unlock()
		return err
	}
	if err := a.SetClean(false); err == nil {
		t.Fatal("no error, though the last copy did not answer")
	}
	close(release)
	<-landed
	waitFor(t, "the given-up write returned", func() bool { return !a.Members[0].sbWriting.Load() })
	if err := a.SetClean(false); err != nil {
		t.Fatalf("the update after the device answered: %v", err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("a power cut after some superblock write leaves an array that cannot be assembled:\n%s", strings.Join(problems, "\n"))
	}
}
