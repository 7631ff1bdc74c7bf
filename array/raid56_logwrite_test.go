package array

import (
	"bytes"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A log entry's write (MemberIO.Log) goes to the member's write-hole log
// area, a data write to its data area.
func TestParityLogWriteOffset(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ChunkSectors: 16}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.logOffset == 0 || a.logOffset != a.SBs[0].LogOffset {
		t.Fatalf("log offset %d, superblock's %d", a.logOffset, a.SBs[0].LogOffset)
	}
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	data := pageBuf(4096)
	h.Submit(0, engine.OpID(0), engine.MemberIO{Member: 1, Kind: engine.IOWrite, FUA: true, Log: true, Sector: 8, Sectors: 8}, data)
	h.Submit(1, engine.OpID(0), engine.MemberIO{Member: 1, Kind: engine.IOWrite, Sector: 8, Sectors: 8}, data)
	if len(r.pending) != 2 || r.pending[0].off != a.logOffset+4096 || r.pending[1].off != a.dataOffset+4096 {
		t.Fatalf("submitted %+v; want the log write at %d, the data write at %d", r.pending, a.logOffset+4096, a.dataOffset+4096)
	}
}

// Writes through a queue fill its write-hole log ring many times over:
// the checkpointer persists checkpoints (on the members' log headers),
// the ring is freed below them and the writes go on; the data reads
// back, the parity is right, and after a stop with no write out the
// next assembly finds nothing to replay.
func TestParityLogRingWraps(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6} {
		t.Run(level.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(level)))
			paths := memberFiles(t, 5, 16<<20)
			a, err := Open(paths, CreateSpec{Level: level, ChunkSectors: 16}, true)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { a.Close() }()
			if err := a.SetClean(false); err != nil {
				t.Fatal(err)
			}
			r := &pRing{done: map[uint16]error{}}
			h := a.newQueue(r)
			ring := a.plog.rings[0]
			g := *a.Engine.Parity
			span := g.ChunkSectors * uint64(g.DataMembers()) * 16
			ref := make([]byte, g.ArraySectors()<<9)
			var id uint64
			for ring.Taken() < 4*ring.Size() {
				pBatch(t, rng, h, r, ref, span, &id)
				if id > 10000 {
					t.Fatalf("the ring never wrapped (%d of %d bytes used)", ring.Used(), ring.Size())
				}
			}
			if p := a.plog.clock.Persisted(); p <= 1 {
				t.Fatalf("no checkpoint persisted after %d writes", id)
			}
			// The metrics see the queue's work: every write logged at
			// least an entry and wrote at least a stripe segment.
			ms := a.Metrics("ublkb0").Parity
			var segs uint64
			for _, n := range ms.Writes {
				segs += n
			}
			if ms.LogEntries < segs || segs < id || ms.LogCheckpoints == 0 {
				t.Fatalf("metrics after %d writes: %+v", id, ms)
			}
			// And every member's operations (log writes included).
			for _, m := range a.Metrics("ublkb0").Members {
				if w := m.Ops[metrics.OpWrite]; w.Ops == 0 || w.Bytes == 0 || m.Ops[metrics.OpRead].Ops == 0 {
					t.Fatalf("member %s: no operations counted: %+v", m.Name, m.Ops)
				}
			}
			hb, err := a.Members[0].ReadBlock(int64(a.logOffset), engine.ParityLogHeaderSize)
			if err != nil {
				t.Fatal(err)
			}
			hd, err := engine.DecodeParityLogHeader(hb, a.logUUID)
			if err != nil || hd.Checkpoint <= 1 {
				t.Fatalf("log header %+v, %v: no checkpoint written", hd, err)
			}
			pReadAll(t, rng, h, r, ref, span)
			pConsistent(t, a, span)
			a.Close() // no write out: its last checkpoint leaves nothing live
			a, err = Open(paths, CreateSpec{Level: -1}, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range a.Warnings {
				if strings.Contains(w, "write-hole log") {
					t.Fatalf("after a stop with no write out: %q", w)
				}
			}
			pConsistent(t, a, span)
			r = &pRing{done: map[uint16]error{}}
			h = a.newQueue(r)
			pReadAll(t, rng, h, r, ref, span)
		})
	}
}

// A member kept as the last copy (raid5 degraded) that fails the write of
// the log's checkpoint: no checkpoint frees the ring, and the writes that
// would wait for its space fail (EIO) instead of waiting for ever; once
// the member takes checkpoints again, writes go on.
func TestParityLogStuckCheckpointFailsWrites(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	paths := memberFiles(t, 4, 16<<20)
	var broken atomic.Bool
	var logOff int64
	spec := CreateSpec{Level: engine.Level5, ChunkSectors: 16, OpenDevice: func(p string) (Device, error) {
		d, err := openFile(p)
		if err != nil || p != paths[0] {
			return d, err
		}
		return offFailDev{Device: d, fail: func(off int64) bool { return broken.Load() && off == logOff }}, nil
	}}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Close() }()
	logOff = int64(a.logOffset)
	a.logCheckpointEvery = 10 * time.Millisecond
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(3); err != nil {
		t.Fatal(err)
	}
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	ring := a.plog.rings[0]
	g := *a.Engine.Parity
	write := func(i int) error {
		t.Helper()
		buf := pageBuf(4096)
		rng.Read(buf)
		sector := uint64(i*8) % (g.ArraySectors() - 8)
		delete(r.done, 0)
		h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: sector, Sectors: 8, Buf: buf})
		pServe(t, rng, h, r, []uint16{0})
		return r.done[0]
	}
	broken.Store(true)
	var failedAt int
	for i := 0; ; i++ {
		if err := write(i); err != nil {
			if !strings.Contains(err.Error(), "kept as the last copy, failed the write of the write-hole log's checkpoint") {
				t.Fatalf("write %d: %v", i, err)
			}
			failedAt = i
			break
		}
		if uint64(i) > 4*ring.Size()/4096 {
			t.Fatalf("%d writes went through with no checkpoint written", i)
		}
	}
	if a.Engine.State().Members[0].State != engine.MemberActive {
		t.Fatal("the last copy was failed")
	}
	broken.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for a.plog.clock.Stuck() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the checkpoint never went through again")
		}
		time.Sleep(time.Millisecond)
	}
	for i := failedAt + 1; i < failedAt+int(ring.Size()/4096); i++ {
		if err := write(i); err != nil {
			t.Fatalf("write %d after the member took checkpoints again: %v", i, err)
		}
	}
}

// fenceRing counts the member operations submitted to watch; it has
// tag buffers and spares (a write is given up only with a spare buffer
// for its request to go on with).
type fenceRing struct {
	*pRing
	watch  *Member
	hits   int
	bufs   [][]byte
	bufIdx []int
	spares []int
}

func newFenceRing() *fenceRing {
	r := &fenceRing{pRing: &pRing{done: map[uint16]error{}}}
	for tag := range r.Depth() {
		r.bufs = append(r.bufs, pageBuf(r.MaxIOBytes()))
		r.bufIdx = append(r.bufIdx, tag)
	}
	return r
}

func (r *fenceRing) ReserveBuffer() (int, bool) {
	if n := len(r.spares); n > 0 {
		b := r.spares[n-1]
		r.spares = r.spares[:n-1]
		return b, true
	}
	r.bufs = append(r.bufs, pageBuf(r.MaxIOBytes()))
	return len(r.bufs) - 1, true
}

func (r *fenceRing) SwapBuffer(tag uint16, spare, n int) int {
	copy(r.bufs[spare][:n], r.bufs[r.bufIdx[tag]][:n])
	old := r.bufIdx[tag]
	r.bufIdx[tag] = spare
	return old
}

func (r *fenceRing) Buffer(tag uint16) []byte { return r.bufs[r.bufIdx[tag]] }
func (r *fenceRing) ReleaseBuffer(b int)      { r.spares = append(r.spares, b) }

func (f *fenceRing) SubmitMember(ud uint64, tag uint16, m *Member, fixed bool, io engine.MemberIO, off uint64, data []byte) error {
	if f.watch != nil && m == f.watch {
		f.hits++
	}
	return f.pRing.SubmitMember(ud, tag, m, fixed, io, off, data)
}

// A log write given up after the member timeout on a member kept as the
// last copy (a degraded raid5) is still out on the device. Its request
// fails, the checkpoint passes its entry and the ring's space is taken
// again by newer entries; none of them, and nothing else, is sent to that
// member until the late write returns (Member.lateWrites), so it cannot
// land over a newer entry there. Once it returns, the member serves again
// and every write acknowledged meanwhile reads back.
func TestParityLateLogWriteFencesItsMember(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ChunkSectors: 16, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Close() }()
	a.logCheckpointEvery = 10 * time.Millisecond
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(3); err != nil {
		t.Fatal(err)
	}
	a.MemberTimeout = 100 * time.Millisecond
	r := newFenceRing()
	h := a.newQueue(r)
	ring := a.plog.rings[0]
	g := *a.Engine.Parity
	ref := make([]byte, g.ArraySectors()<<9)
	// io issues a request of tag 0 with data (a write) or into data (a
	// read) through the tag's buffer, and returns its error.
	io := func(op uint8, sector uint64, data []byte) error {
		delete(r.done, 0)
		b := r.Buffer(0)[:len(data)]
		if op == ublk.IOOpWrite {
			copy(b, data)
		}
		h.Handle(&ublk.Request{Tag: 0, Op: op, Sector: sector, Sectors: uint32(len(data) >> 9), Buf: b})
		pServe(t, rng, h, r.pRing, []uint16{0})
		if op == ublk.IOOpRead {
			copy(data, r.Buffer(0))
		}
		return r.done[0]
	}
	for s := uint64(0); s < g.ArraySectors(); s += 128 { // what the members hold now
		if err := io(ublk.IOOpRead, s, ref[s<<9:(s+128)<<9]); err != nil {
			t.Fatal(err)
		}
	}
	// A write whose log entry's write hangs: an RMW, its data member and
	// its stripe's parity member present.
	first := uint64(0)
	for ; ; first += g.ChunkSectors {
		stripe, _, mem, _ := g.LocateData(first)
		if mem != 3 && g.Stripe(stripe).P != 3 {
			break
		}
	}
	buf := make([]byte, 4096)
	rng.Read(buf)
	delete(r.done, 0)
	copy(r.Buffer(0), buf)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: first, Sectors: 8, Buf: r.Buffer(0)[:4096]})
	var hung pRingOp
	for found := false; !found; {
		for i, o := range r.pending {
			if o.io.Log {
				hung, found = o, true
				r.pending = append(r.pending[:i], r.pending[i+1:]...)
				break
			}
		}
		if !found {
			if len(r.pending) == 0 {
				t.Fatal("the write logged no entry")
			}
			r.deliver(h, 0)
		}
	}
	for len(r.pending) > 0 {
		r.deliver(h, 0)
	}
	time.Sleep(150 * time.Millisecond)
	h.OnTick()
	pServe(t, rng, h, r.pRing, []uint16{0})
	if r.done[0] == nil {
		t.Fatal("a write whose log entry was given up on the last copy succeeded")
	}
	if hung.m.lateWrites.Load() == 0 {
		t.Fatal("the given-up log write is not counted as out on its member")
	}
	// The ring goes round twice: the late entry's space is taken again.
	r.watch = hung.m
	from := ring.Taken()
	ok, failed := 0, 0
	for i := 0; ring.Taken() < from+2*ring.Size(); i++ {
		if i > 100000 {
			t.Fatal("the ring did not go round")
		}
		sector := uint64(rng.Intn(int(g.ArraySectors()/8))) * 8
		rng.Read(buf)
		if io(ublk.IOOpWrite, sector, buf) != nil {
			failed++
			continue
		}
		ok++
		copy(ref[sector<<9:], buf)
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("%d writes succeeded, %d failed: want both (those touching the fenced member fail)", ok, failed)
	}
	if r.hits != 0 {
		t.Fatalf("%d operations were sent to the member while its late log write was out", r.hits)
	}
	// The late write lands now, over its own space only.
	if err := hung.m.WriteAtDurable(hung.data, int64(hung.off)); err != nil {
		t.Fatal(err)
	}
	h.OnCompletion(hung.ud, int32(len(hung.data)))
	if hung.m.lateWrites.Load() != 0 {
		t.Fatal("the late write's return did not lift the fence")
	}
	for i := 0; i < 50; i++ {
		sector := uint64(rng.Intn(int(g.ArraySectors()/8))) * 8
		rng.Read(buf)
		if err := io(ublk.IOOpWrite, sector, buf); err != nil {
			t.Fatalf("write %d after the late write returned: %v", i, err)
		}
		copy(ref[sector<<9:], buf)
	}
	got := make([]byte, 128<<9)
	for s := uint64(0); s < g.ArraySectors(); s += 128 {
		if err := io(ublk.IOOpRead, s, got); err != nil || !bytes.Equal(got, ref[s<<9:(s+128)<<9]) {
			t.Fatalf("read back %d+128: %v, right %v", s, err, err == nil && bytes.Equal(got, ref[s<<9:(s+128)<<9]))
		}
	}
}
