package array

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// dropAll is a rand source under which a power cut keeps nothing of the
// disks' caches (memdev keeps a cached sector when IntN(2) == 0).
type dropAll struct{}

func (dropAll) Uint64() uint64 { return ^uint64(0) }

// servedMirror is a raid1 without a bitmap on two memdev disks of a rack
// that keeps nothing of their caches at a power cut, marked in use as the
// daemon serves it; spec assembles it again.
func servedMirror(t *testing.T) (*memdev.Rack, []string, CreateSpec, *Array) {
	t.Helper()
	rack := memdev.NewRack(rand.New(dropAll{}))
	paths := []string{"/m0", "/m1"}
	for _, p := range paths {
		rack.AddDisk(p, 16<<20)
	}
	spec := CreateSpec{OpenDevice: func(p string) (Device, error) { return rack.Open(p) }}
	create := spec
	create.Level, create.AssumeClean, create.NoBitmap = engine.Level1, true, true
	a, err := Open(paths, create, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	return rack, paths, spec, a
}

// Found by review. TestCleanMarkNotDurableBeforeCachedData: an array without a bitmap is
// resynced after a stop only if its superblocks say it was not stopped
// cleanly, so the clean mark must not become durable on a member before
// the data writes that member took into its volatile cache (md writes its
// superblocks with PREFLUSH|FUA). Here the stop's superblock write reaches
// the media of /m0 ahead of the data in its cache (a write-back cache may
// do that until the flush that follows the write returns), and the power
// fails: /m1 holds the data, /m0 does not, and both say clean. The next
// assembly must still resync the copies; it found the array clean instead
// and left them different, so reads answered either version. (Now every
// member is flushed before any clean mark is written: the copies are the
// same after the cut.)
func TestCleanMarkNotDurableBeforeCachedData(t *testing.T) {
	rack, paths, spec, a := servedMirror(t)
	// A user write, acknowledged without FUA or FLUSH: in both members'
	// caches.
	off := int64(a.dataOffset)
	data := bytes.Repeat([]byte{0x5a}, 4096)
	for _, m := range a.Members {
		if err := m.WriteAt(data, off); err != nil {
			t.Fatal(err)
		}
	}

	orig := writeSuperblock
	t.Cleanup(func() { writeSuperblock = orig })
	m1done := make(chan struct{})
	var once sync.Once
	writeSuperblock = func(m *Member, b []byte) error {
		sb, err := engine.ParseSuperblock(b)
		if err != nil || !sb.Clean {
			return orig(m, b)
		}
		if m.Path == paths[1] {
			defer once.Do(func() { close(m1done) })
			return orig(m, b)
		}
		// /m0: the clean superblock reaches the media before the data
		// cached ahead of it, then the power fails.
		<-m1done
		if err := m.WriteAtDurable(b, engine.SuperblockOffset); err != nil {
			return err
		}
		rack.PowerCut()
		return errors.New("power cut")
	}
	_ = a.SetClean(true) // the stop; cut by the power failure
	a.Close()
	writeSuperblock = orig

	for _, p := range paths {
		sb, err := engine.ParseSuperblock(rack.Stable(rack.Disk(p), engine.SuperblockOffset, engine.SuperblockSize))
		if err != nil || !sb.Clean {
			t.Fatalf("setup: %s superblock after the cut: %+v, %v (want clean)", p, sb, err)
		}
	}
	d0 := rack.Stable(rack.Disk(paths[0]), off, len(data))
	d1 := rack.Stable(rack.Disk(paths[1]), off, len(data))
	same := bytes.Equal(d0, d1) // (the data durable before the clean mark)

	b, err := Open(paths, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if pending, _ := b.fullResync(); !pending && !same {
		t.Fatalf("assembled as cleanly stopped with no resync pending, while %s holds %#x and %s holds %#x at the start of the data area",
			paths[0], d0[0], paths[1], d1[0])
	}
}

// Found by review. TestTornCleanStopResyncs: the stop's clean superblocks reach one member
// and not the other (the power fails in between). /m0 took the clean mark,
// and with it (its flush) the data in its cache; /m1 lost the data in its
// cache and still says, one generation behind, that the array is in use.
// That stop was not clean: an array without a bitmap must be resynced.
// Assembly trusts /m1 (one event of slack) and takes the clean flag from
// /m0, the freshest, so the copies stay different. (md makes a clean mark
// roll its events back, so that a dirty superblock left by a torn update is
// the freshest; flushing every member before any clean superblock is
// written would do as well.)
func TestTornCleanStopResyncs(t *testing.T) {
	rack, paths, spec, a := servedMirror(t)
	off := int64(a.dataOffset)
	data := bytes.Repeat([]byte{0x5a}, 4096)
	for _, m := range a.Members {
		if err := m.WriteAt(data, off); err != nil { // a write without FUA or FLUSH
			t.Fatal(err)
		}
	}

	orig := writeSuperblock
	t.Cleanup(func() { writeSuperblock = orig })
	m0done := make(chan struct{})
	var once sync.Once
	writeSuperblock = func(m *Member, b []byte) error {
		sb, err := engine.ParseSuperblock(b)
		if err != nil || !sb.Clean {
			return orig(m, b)
		}
		if m.Path == paths[0] {
			defer once.Do(func() { close(m0done) })
			return orig(m, b)
		}
		<-m0done // /m1: the power fails before its write
		rack.PowerCut()
		return errors.New("power cut")
	}
	_ = a.SetClean(true) // the stop; cut by the power failure
	a.Close()
	writeSuperblock = orig

	sb0, err0 := engine.ParseSuperblock(rack.Stable(rack.Disk(paths[0]), engine.SuperblockOffset, engine.SuperblockSize))
	sb1, err1 := engine.ParseSuperblock(rack.Stable(rack.Disk(paths[1]), engine.SuperblockOffset, engine.SuperblockSize))
	if err0 != nil || err1 != nil || !sb0.Clean || sb1.Clean || sb0.Events != sb1.Events+1 {
		t.Fatalf("setup: superblocks after the cut: %v %v, %+v, %+v", err0, err1, sb0, sb1)
	}
	d0 := rack.Stable(rack.Disk(paths[0]), off, len(data))
	d1 := rack.Stable(rack.Disk(paths[1]), off, len(data))
	same := bytes.Equal(d0, d1) // (the data durable before the clean mark)

	b, err := Open(paths, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Degraded() {
		t.Fatalf("setup: %s left out: %+v", paths[1], b.Engine.State().Members)
	}
	if pending, _ := b.fullResync(); !pending && !same {
		t.Fatalf("assembled as cleanly stopped with no resync pending, while %s (events %d, clean) holds %#x and %s (events %d, in use) holds %#x",
			paths[0], sb0.Events, d0[0], paths[1], sb1.Events, d1[0])
	}
}

// A member whose flush fails may have lost data it acknowledged: as md
// fails a member whose superblock PREFLUSH fails, it is failed (never the
// last copy) and the others are marked clean without it. The last copy's
// failed flush refuses the mark on every member (the next start resyncs).
func TestCleanMarkFailsMemberWhoseFlushFails(t *testing.T) {
	rack, paths, _, a := servedMirror(t)
	defer a.Close()
	orig := memberSync
	t.Cleanup(func() { memberSync = orig })
	failing := paths[1]
	memberSync = func(m *Member) error {
		if m.Path == failing {
			return errors.New("flush: I/O error")
		}
		return orig(m)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatalf("clean mark with a redundant member's flush failed: %v", err)
	}
	sb := func(p string) *engine.Superblock {
		sb, err := engine.ParseSuperblock(rack.Stable(rack.Disk(p), engine.SuperblockOffset, engine.SuperblockSize))
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	if s0 := sb(paths[0]); !s0.Clean || s0.Roles[1].State != engine.RoleFaulty {
		t.Fatalf("%s after the stop: clean %v, role 1 %v; want clean, role 1 faulty", paths[0], s0.Clean, s0.Roles[1].State)
	}

	// Now the last copy's flush fails: no clean mark anywhere.
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	failing = paths[0]
	if err := a.SetClean(true); err == nil {
		t.Fatal("marked clean with the last copy's flush failed")
	}
	if s0 := sb(paths[0]); s0.Clean {
		t.Fatalf("%s: clean after its own flush failed", paths[0])
	}
}
