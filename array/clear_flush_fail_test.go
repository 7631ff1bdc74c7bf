package array

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review: a bitmap clear is
// safe only once every member's data writes of the cleared region are
// durable (commit flushes every member first). Here member B fails that
// flush while the clear's batch is out; at the same moment a superblock
// update (Fail of another member, C) has taken its engine state (B active)
// and waits for the flusher. The flusher fails B in memory and writes the
// header of the new generation without B, but the superblocks of that
// generation are then written from the state taken before: B active, to
// A and B. Until B's failure is recorded one generation later, a power
// cut assembled B as in sync, and its bitmap copy (header older than the
// superblocks) was ignored: the region read clean from A's copy, though B
// never made its data durable there. Nothing resynced it; the copies
// differed. writeSuperblocks now records, in the generation it writes, a
// member that failed while the bitmap writer made that generation
// durable.
//
// md: a failed flush (REQ_PREFLUSH error on a bitmap write) is md_error;
// the superblock update that follows carries the member faulty, and the
// bitmap page is not considered written on it.
func TestClearFlushFailureNotRecordedInSync(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a := newRAID1(t, paths)
	defer a.Close()
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	// A first clear of this generation: its header (events cleared) is
	// durable, so the next clear goes out in one batch.
	userWrite(t, a, paths, 2<<20, 4096, 0x11)
	a.fl.do(a.fl.clearIdle)
	const X = 5 << 20
	userWrite(t, a, paths, X, 4096, 0x5b)
	rx, _ := a.Bitmap.Regions(X>>9, 8)
	if !a.Bitmap.Dirty(rx) {
		t.Fatal("written region not dirty")
	}
	E := superblockOf(t, paths[0]).Events

	bDev := a.Members[1]
	var armed sync.Once
	inFlush, release := make(chan struct{}), make(chan struct{})
	origSync := memberSync
	t.Cleanup(func() { memberSync = origSync })
	memberSync = func(m *Member) error {
		if m == bDev {
			failed := false
			armed.Do(func() {
				close(inFlush)
				<-release
				failed = true
			})
			if failed {
				return unix.EIO
			}
		}
		return origSync(m)
	}
	// Power cut just before the generation recording B's failure.
	var snapMu sync.Mutex
	var snap []string
	origWrite := writeSuperblock
	t.Cleanup(func() { writeSuperblock = origWrite })
	writeSuperblock = func(m *Member, b []byte) error {
		if sb, err := engine.ParseSuperblock(b); err == nil && sb.Events >= E+2 {
			snapMu.Lock()
			if snap == nil {
				snap = powerCutCopy(t, paths)
			}
			snapMu.Unlock()
		}
		return origWrite(m, b)
	}

	clearDone := make(chan struct{})
	go func() { a.fl.do(a.fl.clearIdle); close(clearDone) }()
	<-inFlush // the clear's batch is out, X cleared in the image
	failDone := make(chan error, 1)
	go func() { failDone <- a.Fail(2) }()
	time.Sleep(300 * time.Millisecond) // Fail has taken its state and waits for the flusher
	close(release)
	<-clearDone
	if err := <-failDone; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		snapMu.Lock()
		got := snap
		if got == nil && superblockOf(t, paths[0]).Roles[1].State == engine.RoleFaulty {
			// Recorded in Fail's own generation (no later one to cut
			// before): the cut comes now.
			snap = powerCutCopy(t, paths)
			got = snap
		}
		snapMu.Unlock()
		if got != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B's failure was never recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := a.Engine.State().Members[1].State; st != engine.MemberFaulty {
		t.Fatalf("B after its failed flush: %s", st)
	}
	cut := snap
	sbA, sbB := superblockOf(t, cut[0]), superblockOf(t, cut[1])
	t.Logf("at the cut: A events %d role1 %v; B events %d role1 %v; B's bitmap header events %d; region %d on A: %s",
		sbA.Events, sbA.Roles[1].State, sbB.Events, sbB.Roles[1].State, bitmapHeaderOf(t, cut[1]).Events, rx, a.Bitmap.State(rx))

	// The write B took into its cache is lost with the failed flush.
	scribble(t, a, cut[1], X, 4096, 0x00)

	b, err := Open(cut, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st := b.Engine.State()
	t.Logf("assembled: roles %v %v %v; region %d %s needs sync %v", st.Members[0].State, st.Members[1].State, st.Members[2].State,
		rx, b.Bitmap.State(rx), b.Bitmap.NeedsSync(rx))
	b.StartBackground()
	b.WaitSync()
	if st.Members[1].State == engine.MemberActive && b.Bitmap.State(rx) == bitmap.Clean {
		d0, d1 := dataOf(t, b, cut[0]), dataOf(t, b, cut[1])
		if !bytes.Equal(d0[X:X+4096], d1[X:X+4096]) {
			t.Fatalf("B assembled in sync with region %d clean, yet B failed the flush the clear relied on: byte at %d is %#x on A, %#x on B (no resync)",
				rx, X, d0[X], d1[X])
		}
	}
}
