package array

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
	"golang.org/x/sys/unix"
)

// pRing is a ring whose member operations the test carries out on the
// member devices when it delivers them; wake-ups (the bitmap's flusher,
// the stripe lock) set a flag the test's loop answers with OnWake.
type pRing struct {
	id      int
	woke    atomic.Bool
	pending []pRingOp
	done    map[uint16]error
	// failOn, if set, fails a member operation with EIO.
	failOn func(io engine.MemberIO) bool
}

type pRingOp struct {
	ud   uint64
	m    *Member
	io   engine.MemberIO
	off  uint64
	data []byte
}

func (r *pRing) ID() int                                 { return r.id }
func (r *pRing) Depth() int                              { return 8 }
func (r *pRing) MaxIOBytes() int                         { return 64 << 10 }
func (r *pRing) Now() time.Time                          { return time.Now() }
func (r *pRing) Wake()                                   { r.woke.Store(true) }
func (r *pRing) SetTargetFile(i, fd int) error           { return nil }
func (r *pRing) Complete(tag uint16, err error)          { r.done[tag] = err }
func (r *pRing) ZeroCopy() bool                          { return false }
func (r *pRing) ReserveBuffer() (int, bool)              { return 0, false }
func (r *pRing) SwapBuffer(tag uint16, spare, n int) int { return spare }
func (r *pRing) ReleaseBuffer(b int)                     {}
func (r *pRing) Buffer(tag uint16) []byte                { panic("pRing: no Rebuffer (no spare buffers)") }
func (r *pRing) Fail(err error)                          { panic(err) }

func (r *pRing) SubmitMember(ud uint64, tag uint16, m *Member, fixed bool, io engine.MemberIO, off uint64, data []byte) error {
	r.pending = append(r.pending, pRingOp{ud, m, io, off, data})
	return nil
}

// deliver carries out pending operation i and completes it on h.
func (r *pRing) deliver(h *queue, i int) {
	o := r.pending[i]
	r.pending = append(r.pending[:i], r.pending[i+1:]...)
	var err error
	switch {
	case r.failOn != nil && r.failOn(o.io):
		err = unix.EIO
	case o.io.Kind == engine.IORead:
		err = o.m.ReadAt(o.data, int64(o.off))
	case o.io.Kind == engine.IOWrite && o.io.FUA:
		err = o.m.WriteAtDurable(o.data, int64(o.off))
	case o.io.Kind == engine.IOWrite:
		err = o.m.WriteAt(o.data, int64(o.off))
	case o.io.Kind == engine.IOFlush:
		err = o.m.Flush()
	default:
		err = unix.EOPNOTSUPP
	}
	res := int32(len(o.data))
	if o.io.Kind == engine.IOFlush {
		res = 0
	}
	if err != nil {
		res = -int32(unix.EIO)
	}
	h.OnCompletion(o.ud, res)
}

// pServe runs the queue until every request in want has completed:
// member operations delivered in a random order, wake-ups answered.
func pServe(t *testing.T, rng *rand.Rand, h *queue, r *pRing, want []uint16) {
	t.Helper()
	pServeN(t, rng, []*queue{h}, []*pRing{r}, [][]uint16{want})
}

// pServeN is pServe over several queues of one array at once, taking
// turns at random: want[i] are queue i's requests.
func pServeN(t *testing.T, rng *rand.Rand, hs []*queue, rs []*pRing, want [][]uint16) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		i := rng.Intn(len(hs))
		h, r := hs[i], rs[i]
		busy := false
		for _, r := range rs {
			busy = busy || len(r.pending) > 0 || r.woke.Load()
		}
		switch {
		case len(r.pending) > 0:
			r.deliver(h, rng.Intn(len(r.pending)))
		case r.woke.Swap(false):
			h.OnWake()
		case busy:
		default:
			all := true
			for i, r := range rs {
				for _, tag := range want[i] {
					_, ok := r.done[tag]
					all = all && ok
				}
			}
			if all {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("requests %v never completed", want)
			}
			time.Sleep(50 * time.Microsecond) // the bitmap's flusher
		}
	}
}

// pReq is one request of a batch.
type pReq struct {
	op      uint8
	sector  uint64
	sectors uint32
	buf     []byte
}

// pBatch runs up to depth requests at once (writes and reads that do not
// overlap each other, flushes), checking reads against ref and applying
// writes to it.
func pBatch(t *testing.T, rng *rand.Rand, h *queue, r *pRing, ref []byte, span uint64, id *uint64) {
	t.Helper()
	pBatchN(t, rng, []*queue{h}, []*pRing{r}, ref, span, id)
}

// pBatchN is pBatch over several queues at once: the requests of a batch
// do not overlap across queues either, but share stripes.
func pBatchN(t *testing.T, rng *rand.Rand, hs []*queue, rs []*pRing, ref []byte, span uint64, id *uint64) {
	t.Helper()
	var reqs []pReq
	var qs []int
	var tags []uint16
	overlaps := func(s uint64, n uint32) bool {
		for _, q := range reqs {
			if q.op != ublk.IOOpFlush && s < q.sector+uint64(q.sectors) && q.sector < s+uint64(n) {
				return true
			}
		}
		return false
	}
	for qi := range hs {
		h, r := hs[qi], rs[qi]
		for tag := range uint16(r.Depth()) {
			if rng.Intn(10) == 0 {
				reqs = append(reqs, pReq{op: ublk.IOOpFlush})
			} else {
				n := uint32(1 + rng.Intn(128))
				s := uint64(rng.Int63n(int64(span - uint64(n))))
				if overlaps(s, n) {
					continue
				}
				q := pReq{op: ublk.IOOpRead, sector: s, sectors: n, buf: pageBuf(int(n) << 9)}
				if rng.Intn(2) == 0 {
					q.op = ublk.IOOpWrite
					*id++
					fillSectors(q.buf, *id)
				}
				reqs = append(reqs, q)
			}
			q := reqs[len(reqs)-1]
			delete(r.done, tag)
			tags = append(tags, tag)
			qs = append(qs, qi)
			var flags uint32
			if q.op == ublk.IOOpWrite && rng.Intn(4) == 0 {
				flags = ublk.IOFlagFUA
			}
			h.Handle(&ublk.Request{Tag: tag, Op: q.op, Sector: q.sector, Sectors: q.sectors, Flags: flags, Buf: q.buf})
		}
	}
	want := make([][]uint16, len(hs))
	for i, tag := range tags {
		want[qs[i]] = append(want[qs[i]], tag)
	}
	pServeN(t, rng, hs, rs, want)
	for i, tag := range tags {
		q := reqs[i]
		if err := rs[qs[i]].done[tag]; err != nil {
			t.Fatalf("op %d %d+%d: %v", q.op, q.sector, q.sectors, err)
		}
		switch q.op {
		case ublk.IOOpWrite:
			copy(ref[q.sector<<9:], q.buf)
		case ublk.IOOpRead:
			if !bytes.Equal(q.buf, ref[q.sector<<9:(q.sector+uint64(q.sectors))<<9]) {
				t.Fatalf("read %d+%d: wrong data", q.sector, q.sectors)
			}
		}
	}
}

// pageBuf is n bytes at a page boundary, as a ublk request's buffer
// (the file members are opened with O_DIRECT).
func pageBuf(n int) []byte {
	b := make([]byte, n+4096)
	o := int(4096 - uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4096)
	return b[o%4096 : o%4096+n : o%4096+n]
}

func fillSectors(b []byte, id uint64) {
	for i := 0; i < len(b); i += 8 {
		v := id<<20 ^ uint64(i)*0x9e3779b97f4a7c15
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

// pReadAll reads [0, span) through a new queue and compares it with ref.
func pReadAll(t *testing.T, rng *rand.Rand, h *queue, r *pRing, ref []byte, span uint64) {
	t.Helper()
	pReadAllFrom(t, rng, h, r, ref, 0, span)
}

// pReadAllFrom is pReadAll over [from, span).
func pReadAllFrom(t *testing.T, rng *rand.Rand, h *queue, r *pRing, ref []byte, from, span uint64) {
	t.Helper()
	for s := from; s < span; s += 128 {
		n := uint32(min(128, span-s))
		buf := pageBuf(int(n) << 9)
		delete(r.done, 0)
		h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: s, Sectors: n, Buf: buf})
		pServe(t, rng, h, r, []uint16{0})
		if err := r.done[0]; err != nil || !bytes.Equal(buf, ref[s<<9:(s+uint64(n))<<9]) {
			t.Fatalf("read back %d+%d: %v, right %v", s, n, err, err == nil && bytes.Equal(buf, ref[s<<9:(s+uint64(n))<<9]))
		}
	}
}

// pConsistent checks, on the member devices, that every stripe with a
// sector below span has P (and Q) equal to the parity of its data.
func pConsistent(t *testing.T, a *Array, span uint64) {
	t.Helper()
	pConsistentFrom(t, a, 0, span)
}

// pConsistentFrom is pConsistent for the stripes from stripe first on.
func pConsistentFrom(t *testing.T, a *Array, first, span uint64) {
	t.Helper()
	g := *a.Engine.Parity
	par, err := engine.NewParity(g.DataMembers(), g.Level == engine.Level6)
	if err != nil {
		t.Fatal(err)
	}
	per := g.ChunkSectors * uint64(g.DataMembers())
	cb := int(g.ChunkSectors << 9)
	for s := first; s*per < span; s++ {
		m := g.Stripe(s)
		chunks := make([][]byte, g.Members)
		for mem := range g.Members {
			chunks[mem] = pageBuf(cb)
			if err := a.Members[mem].ReadAt(chunks[mem], int64(a.dataOffset+s*g.ChunkSectors<<9)); err != nil {
				t.Fatal(err)
			}
		}
		data := make([][]byte, g.DataMembers())
		for mem := range g.Members {
			if sl := m.Slot[mem]; sl >= 0 {
				data[sl] = chunks[mem]
			}
		}
		want := [][]byte{make([]byte, cb), make([]byte, cb)}[:par.Count()]
		if err := par.Compute(data, want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want[0], chunks[m.P]) || (m.Q >= 0 && !bytes.Equal(want[1], chunks[m.Q])) {
			t.Fatalf("stripe %d: parity is not that of its data", s)
		}
	}
}

// A raid5 and a raid6 array served through the real queue handler over
// file members, with the write-intent bitmap: random writes, reads and
// flushes in batches whose member operations complete in a random
// order; P/Q consistent on the members afterwards; then one member
// (raid6: two, one after the other) failing its writes: the failure is
// recorded in the surviving superblocks, every request still succeeds
// and reads right (reconstructed); then the array stopped cleanly,
// assembled degraded and read back through a new queue.
func TestParityServe(t *testing.T) {
	for _, tc := range []struct {
		level   engine.Level
		members int
		layout  engine.ParityLayout
		garbage bool
	}{
		{engine.Level5, 4, engine.LeftSymmetric, false}, {engine.Level6, 5, engine.RightAsymmetric, false},
		{engine.Level5, 5, engine.LeftAsymmetric, false},
		{engine.Level5, 5, engine.RightSymmetric, true}, {engine.Level6, 7, engine.LeftSymmetric, true},
	} {
		name := fmt.Sprintf("%s-%d-%s", tc.level, tc.members, tc.layout)
		if tc.garbage {
			name += "-garbage"
		}
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.members)*10 + int64(tc.level)))
			paths := memberFiles(t, tc.members, 16<<20)
			if tc.garbage {
				// What the devices held before: the never-written
				// regions' parity is garbage, so only RCW (never RMW)
				// may write there until a resync builds it.
				for _, p := range paths {
					b := make([]byte, 16<<20)
					rng.Read(b[8192:])
					if err := os.WriteFile(p, b, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			spec := CreateSpec{Level: tc.level, ParityLayout: tc.layout, ChunkSectors: 16, RegionSectors: 128}
			a, err := Open(paths, spec, true)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { a.Close() }()
			if a.Engine.Parity == nil || a.Bitmap == nil || a.ZeroCopy() {
				t.Fatalf("parity %v, bitmap %v, zero copy %v", a.Engine.Parity, a.Bitmap != nil, a.ZeroCopy())
			}
			g := *a.Engine.Parity
			p := a.Params()
			nd := uint64(g.DataMembers())
			if p.Basic.DevSectors != g.ArraySectors() || p.Basic.IOMinShift != 13 || p.Basic.ChunkSectors != 0 ||
				p.Types&ublk.ParamTypeDiscard != 0 || (nd&(nd-1) == 0) != (p.Basic.IOOptShift == uint8(13+bitsLen(nd)-1)) {
				t.Fatalf("params %+v", p.Basic)
			}
			if err := a.SetClean(false); err != nil {
				t.Fatal(err)
			}
			if tc.garbage {
				// No background job: the resync the first writes kick
				// never runs, so every later write to those regions is
				// planned over untrusted parity (as before the resync
				// reaches a region).
				a.StopSync()
			}
			r := &pRing{done: map[uint16]error{}}
			h := a.newQueue(r)
			const span = 4096 // 2 MiB: many stripes, regions and both overlapping
			ref := make([]byte, g.ArraySectors()<<9)
			var id uint64
			if tc.garbage {
				// Written once in full first, so that every read has
				// one right answer, in writes of half a chunk: over
				// trusted parity each would be an RMW (one data chunk
				// of four or five), which would carry the garbage on.
				for s := uint64(0); s < span; s += 8 {
					id++
					buf := pageBuf(8 << 9)
					fillSectors(buf, id)
					delete(r.done, 0)
					h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: s, Sectors: 8, Buf: buf})
					pServe(t, rng, h, r, []uint16{0})
					if err := r.done[0]; err != nil {
						t.Fatal(err)
					}
					copy(ref[s<<9:], buf)
				}
			}
			for range 40 {
				pBatch(t, rng, h, r, ref, span, &id)
			}
			first, last := a.Bitmap.Regions(0, span)
			if tc.garbage {
				for reg := first; reg <= last; reg++ {
					if !a.Bitmap.Written(reg) || !a.Bitmap.NeedsSync(reg) {
						t.Fatalf("region %d: written %v, needs sync %v: a first write must leave it untrusted until resynced", reg, a.Bitmap.Written(reg), a.Bitmap.NeedsSync(reg))
					}
				}
			} else {
				// The first writes filled the regions; the resync they
				// kicked (running meanwhile) recomputed their parity and
				// trusts them.
				a.WaitSync()
				if s := a.SyncStatus(); s.LastAction != "resync" || s.LastResult != "ok" || s.ResyncNeeded {
					t.Fatalf("after the first writes' resync: %+v", s)
				}
				pConsistent(t, a, g.ArraySectors())
				for reg := first; reg <= last; reg++ {
					// (Random writes may have missed a region.)
					if a.Bitmap.NeedsSync(reg) {
						t.Fatalf("region %d: written %v, needs sync %v: its resync must have trusted it", reg, a.Bitmap.Written(reg), a.Bitmap.NeedsSync(reg))
					}
				}
			}
			if reg, _ := a.Bitmap.Regions(g.ArraySectors()-1, 1); a.Bitmap.Written(reg) || !a.parityUntrusted(g.Stripes()-1) {
				t.Fatalf("the last region was never written but says written %v", a.Bitmap.Written(reg))
			}
			// Lose members, one at a time, by failing their writes.
			for lost := range g.ParityMembers() {
				victim := 1 + lost*2
				r.failOn = func(io engine.MemberIO) bool { return int(io.Member) == victim && io.Kind == engine.IOWrite }
				for range 20 {
					pBatch(t, rng, h, r, ref, span, &id)
				}
				if s := a.Engine.State().Members[victim].State; s != engine.MemberFaulty {
					t.Fatalf("member %d is %v after failing its writes", victim, s)
				}
				r.failOn = nil
				in := readSB(a.Members[0])
				if in.SB == nil || in.SB.Roles[victim].State != engine.RoleFaulty {
					t.Fatalf("member 0's superblock does not record member %d failed: %+v", victim, in)
				}
				for range 10 {
					pBatch(t, rng, h, r, ref, span, &id)
				}
				pReadAll(t, rng, h, r, ref, span)
			}
			if err := a.SetClean(true); err != nil {
				t.Fatal(err)
			}
			a.Close()
			// Degraded and clean: it assembles (without the failed
			// members) and reads back.
			var keep []string
			for i, p := range paths {
				if i%2 == 0 || i > 2*g.ParityMembers()-1 {
					keep = append(keep, p)
				}
			}
			a, err = Open(keep, CreateSpec{Level: -1}, false)
			if err != nil {
				t.Fatal(err)
			}
			if !a.Degraded() || a.Engine.Parity == nil {
				t.Fatalf("reassembled: degraded %v", a.Degraded())
			}
			r = &pRing{id: 1, done: map[uint16]error{}}
			h = a.newQueue(r)
			pReadAll(t, rng, h, r, ref, span)
		})
	}
}

func bitsLen(n uint64) int {
	l := 0
	for ; n > 0; n >>= 1 {
		l++
	}
	return l
}

// Three queues of one raid6 array at once, their requests sharing
// stripes (not sectors): the array's stripe lock orders them and wakes
// the queues that wait (the test answers wake-ups only); every request
// succeeds, reads are right, parity consistent, healthy and with a member
// failing its writes.
func TestParityServeQueues(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	paths := memberFiles(t, 5, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level6, ParityLayout: engine.LeftSymmetric, ChunkSectors: 8, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var hs []*queue
	var rs []*pRing
	for q := range 3 {
		r := &pRing{id: q, done: map[uint16]error{}}
		rs, hs = append(rs, r), append(hs, a.newQueue(r))
	}
	const span = 1024
	ref := make([]byte, a.Engine.Parity.ArraySectors()<<9)
	var id uint64
	for range 60 {
		pBatchN(t, rng, hs, rs, ref, span, &id)
	}
	if a.stripeLock == nil {
		t.Fatal("no stripe lock")
	}
	pConsistent(t, a, a.Engine.Parity.ArraySectors())
	rs[1].failOn = func(io engine.MemberIO) bool { return io.Member == 2 && io.Kind == engine.IOWrite }
	for range 30 {
		pBatchN(t, rng, hs, rs, ref, span, &id)
	}
	rs[1].failOn = nil
	if s := a.Engine.State().Members[2].State; s != engine.MemberFaulty {
		t.Fatalf("member 2 is %v", s)
	}
	pReadAll(t, rng, hs[0], rs[0], ref, span)
}

// writtenParityArray is a new raid5/6 array of members 16 MiB files
// (chunk 16 sectors, bitmap regions of 128), served by one queue, after
// batches of pBatch over its first span sectors (ref holds what they
// wrote) and the initial resync: parity trusted. The array is closed at
// the end of the test.
func writtenParityArray(t *testing.T, rng *rand.Rand, level engine.Level, members, batches int, span uint64) (a *Array, h *queue, r *pRing, ref []byte, id uint64) {
	t.Helper()
	paths := memberFiles(t, members, 16<<20)
	a, err := Open(paths, CreateSpec{Level: level, ChunkSectors: 16, RegionSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	r = &pRing{done: map[uint16]error{}}
	h = a.newQueue(r)
	ref = make([]byte, a.Engine.Parity.ArraySectors()<<9)
	for range batches {
		pBatch(t, rng, h, r, ref, span, &id)
	}
	a.WaitSync()
	return a, h, r, ref, id
}
