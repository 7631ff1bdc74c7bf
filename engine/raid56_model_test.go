package engine

import (
	"bytes"
	"math/bits"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// pModelMode selects what a run of the raid5/6 executor model allows.
type pModelMode int

const (
	// pModelStrict: requests in flight together never overlap, and no
	// more members are lost than the parity covers: every request must
	// succeed and every read return the one right answer.
	pModelStrict pModelMode = iota
	// pModelOverlap: reads may overlap writes in flight (from any
	// queue): each sector a read returns must be its data before the
	// read started, after it ended, or that of a write in flight
	// meanwhile (never another sector's, never a half-computed
	// reconstruction).
	pModelOverlap
	// pModelFailures: pModelOverlap with member failures past what the
	// parity covers (requests may then fail), read repair, untrusted
	// parity, and member timeouts (Tick gives operations up; they land
	// late, a late read over its old buffer, a late write on its member,
	// which the array fences meanwhile: Member.lateWrites). A read that
	// succeeds must still return old or new data, but for the stripes of
	// a write that failed (which may be left unhealed:
	// ErrStripeUnhealed), and every sector read back at the end must be
	// the last written.
	pModelFailures
)

// TestRaid56ExecutorModel runs random reads, writes and flushes from several
// queues at once on one raid5 or raid6 array, member operations
// completing in a drawn order, with up to as many members lost (dead,
// failing one operation, or rebuilding from a drawn offset with garbage
// above it) as the parity covers. Requests in flight together
// never overlap (so that each read has one right answer) but share
// stripes, which the stripe lock orders. Every request must succeed, and
// be acknowledged only once the failures of members it saw fail are
// durable; every read must return the reference data; at the end every
// sector reads back right, and with no member lost every stripe's parity
// is consistent.
func TestRaid56ExecutorModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runPModel(t, pModelStrict) })
}

// TestRaid56ExecutorModelOverlappingReads is the model with reads allowed
// to overlap writes in flight (pModelOverlap).
func TestRaid56ExecutorModelOverlappingReads(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runPModel(t, pModelOverlap) })
}

// TestRaid56ExecutorModelFailuresAndTimeouts is the model with failures
// past the parity's cover and member timeouts (pModelFailures).
func TestRaid56ExecutorModelFailuresAndTimeouts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runPModel(t, pModelFailures) })
}

func runPModel(t *rapid.T, mode pModelMode) {
	failures := mode == pModelFailures
	g := drawParityGeo(t)
	queues := rapid.IntRange(1, 3).Draw(t, "queues")
	const depth, maxSectors = 3, 48
	w := newPWorld(t, g, queues, depth, maxSectors<<9)
	size := g.ArraySectors()
	ref := make([]byte, size<<9)
	var bm *pIntent
	if rapid.Bool().Draw(t, "bitmap") {
		bm = newPIntent(w, uint64(rapid.SampledFrom([]int{8, 16, 64}).Draw(t, "region")))
		bm.shared = true
	}
	if rapid.Bool().Draw(t, "write-hole log") {
		// Rings of one to three writes: they fill, and writes wait.
		per := uint64(g.ParityLogBytesPerRequest(maxSectors << 9))
		ring := (per*uint64(rapid.IntRange(1, 3).Draw(t, "writes per ring")) + 4095) &^ 4095
		w.enableLog(t, ParityLogHeaderSize+uint64(queues)*ring, maxSectors<<9)
		w.logHook = func(pOp) {}
	}
	if rapid.Bool().Draw(t, "tight stripe buffers") {
		// Each queue's pool holds one buffer of the largest need, which
		// every request takes (raid56_slab.go): they wait for each
		// other's.
		for _, e := range w.execs {
			e.SerializeBuffers()
		}
	}
	var now time.Duration
	if failures {
		if rapid.Bool().Draw(t, "readrepair") {
			for _, e := range w.execs {
				e.ReadRepair = func(int, uint64, uint32) {}
			}
		}
		if rapid.Bool().Draw(t, "untrusted") {
			um := rapid.Uint64().Draw(t, "umask")
			for _, e := range w.execs {
				e.Untrusted = func(s uint64) bool { return um&(1<<(s%64)) != 0 }
			}
		}
		for _, e := range w.execs {
			e.Now = func() time.Duration { return now }
			e.MemberTimeout = 10 * time.Second
		}
		w.abandon = true
	}
	inflight := make([][]*pInflight, queues)
	for q := range inflight {
		inflight[q] = make([]*pInflight, depth)
	}
	// cands[f]: what read f may return, sector by sector; excuse[f]: its
	// sectors in stripes a failed write left unknown (pModelFailures).
	cands := map[*pInflight][][]byte{}
	excuse := map[*pInflight]map[uint64]bool{}
	unknown := make([]bool, size)

	var lost uint64 // members dead, given an error, or rebuilding
	if rb := rapid.IntRange(-1, g.Members-1).Draw(t, "rebuilding"); rb >= 0 {
		// In sync below off only: garbage above, which reads must never
		// return.
		off := rapid.Uint64Range(0, g.MemberSectors).Draw(t, "rebuild offset")
		fill(w.members[rb].data[off<<9:], 99)
		w.arr.Update(func(ms []MemberStatus) { ms[rb] = MemberStatus{State: MemberRebuilding, RebuildOffset: off} })
		w.durable, w.asked = w.arr.State().Gen, w.arr.State().Gen
		for _, e := range w.execs {
			e.Persisted(w.durable)
		}
		lost |= 1 << uint(rb)
	}
	mayLose := func(m int) bool {
		return failures || bits.OnesCount64(lost|1<<uint(m)) <= g.ParityMembers()
	}
	w.failHook = func(o pOp) bool {
		if failures && o.io.Kind != IOFlush {
			for _, l := range w.late {
				if l.io.Member == o.io.Member && l.io.Kind != IORead && l.io.Kind != IOFlush {
					return true // (the array's fence: Member.lateWrites)
				}
			}
		}
		if !rapid.Bool().Draw(t, "inject") || !mayLose(int(o.io.Member)) {
			return false
		}
		if rapid.IntRange(0, 9).Draw(t, "error") != 0 {
			return false
		}
		lost |= 1 << uint(o.io.Member)
		return true
	}
	overlaps := func(sector uint64, n uint32, write bool) bool {
		for q := range inflight {
			for _, f := range inflight[q] {
				clash := write && f != nil && f.op == ReqWrite
				if mode == pModelStrict {
					clash = f != nil && (write || f.op == ReqWrite)
				}
				if clash && sector < f.sector+uint64(f.sectors) && f.sector < sector+uint64(n) {
					return true
				}
			}
		}
		return false
	}
	retire := func(q int, tag uint16) {
		delete(cands, inflight[q][tag])
		delete(excuse, inflight[q][tag])
		inflight[q][tag] = nil
		delete(w.done[q], tag)
		if w.rebuf != nil {
			delete(w.rebuf[q], tag)
		}
	}
	// collect checks and retires the requests that completed: writes
	// first, whose data a read completed in the same turn may return.
	collect := func() {
		if w.early != "" {
			if !failures {
				t.Fatal(w.early)
			}
			w.early = ""
		}
		if w.issued != "" {
			t.Fatal(w.issued)
		}
		if bm != nil && bm.problem != "" {
			t.Fatal(bm.problem)
		}
		for pass := range 2 {
			for q := range w.done {
				for tag := range uint16(depth) {
					err, ok := w.done[q][tag]
					if !ok || (pass == 0) != (inflight[q][tag].op == ReqWrite) {
						continue
					}
					f := inflight[q][tag]
					if err != nil && !failures {
						t.Fatalf("queue %d %v %d+%d failed with %d of %d members lost: %v", q, f.op, f.sector, f.sectors,
							bits.OnesCount64(lost), g.Members, err)
					}
					if err != nil {
						if f.op == ReqWrite {
							per := g.ChunkSectors * uint64(g.DataMembers())
							for s := f.sector / per * per; s < (f.sector+uint64(f.sectors)+per-1)/per*per; s++ {
								unknown[s] = true
								for r2 := range cands {
									if s >= r2.sector && s < r2.sector+uint64(r2.sectors) {
										excuse[r2][s] = true
									}
								}
							}
						}
						retire(q, tag)
						continue
					}
					n := uint64(f.sectors) << 9
					switch f.op {
					case ReqFlush:
						// Nothing to check but that it succeeded.
					case ReqWrite:
						copy(ref[f.sector<<9:], f.buf[:n])
						for s := f.sector; s < f.sector+uint64(f.sectors); s++ {
							unknown[s] = false
						}
					default:
						rb := f.buf
						if w.rebuf != nil && w.rebuf[q][tag] != nil {
							rb = w.rebuf[q][tag]
						}
						c := append(cands[f], ref[f.sector<<9:f.sector<<9+n])
						for sec := range uint64(f.sectors) {
							ok := unknown[f.sector+sec] || excuse[f][f.sector+sec]
							for _, cb := range c {
								ok = ok || bytes.Equal(rb[sec<<9:(sec+1)<<9], cb[sec<<9:(sec+1)<<9])
							}
							if !ok {
								t.Fatalf("queue %d read %d+%d: sector %d neither old nor new", q, f.sector, f.sectors, f.sector+sec)
							}
						}
					}
					retire(q, tag)
				}
			}
		}
	}
	actions := 5
	if failures {
		actions = 7
	}
	writes := uint64(0)
	steps := rapid.IntRange(1, 80).Draw(t, "steps")
	for range steps {
		switch rapid.IntRange(0, actions).Draw(t, "action") {
		case 0, 1: // start a request
			q := rapid.IntRange(0, queues-1).Draw(t, "queue")
			tag := rapid.IntRange(0, depth-1).Draw(t, "tag")
			if inflight[q][tag] != nil {
				continue
			}
			if rapid.IntRange(0, 7).Draw(t, "flush") == 0 {
				inflight[q][tag] = &pInflight{op: ReqFlush}
				w.execs[q].Start(uint16(tag), ReqFlush, ^uint64(0), 0, false, nil)
				continue
			}
			write := rapid.Bool().Draw(t, "write")
			sector := rapid.Uint64Range(0, size-1).Draw(t, "sector")
			n := uint32(rapid.Uint64Range(1, min(size-sector, maxSectors)).Draw(t, "sectors"))
			if overlaps(sector, n, write) {
				continue
			}
			// A fresh buffer each time: an abandoned read may still land
			// in the last one.
			f := &pInflight{op: ReqRead, sector: sector, sectors: n, buf: make([]byte, maxSectors<<9)}
			if write {
				f.op = ReqWrite
				writes++
				fill(f.buf[:n<<9], writes)
				for r2, c := range cands {
					cands[r2] = append(c, overlay(ref, f, r2.sector, r2.sectors))
				}
			} else {
				cands[f] = [][]byte{append([]byte(nil), ref[sector<<9:(sector+uint64(n))<<9]...)}
				excuse[f] = map[uint64]bool{}
				for s := sector; s < sector+uint64(n); s++ {
					if unknown[s] {
						excuse[f][s] = true
					}
				}
				for q2 := range inflight {
					for _, f2 := range inflight[q2] {
						if f2 != nil && f2.op == ReqWrite {
							cands[f] = append(cands[f], overlay(ref, f2, sector, n))
						}
					}
				}
			}
			inflight[q][tag] = f
			w.execs[q].Start(uint16(tag), f.op, sector, n, rapid.Bool().Draw(t, "fua"), f.buf)
		case 2, 3: // complete a member operation
			if len(w.pending) > 0 {
				w.deliver(rapid.IntRange(0, len(w.pending)-1).Draw(t, "op"))
			}
		case 4: // a durable state, or a lock wake-up
			if w.asked > w.durable && rapid.Bool().Draw(t, "persist") {
				w.persist()
			}
			for q, b := range w.wakes {
				if b {
					w.wake(q)
				}
			}
			if bm != nil && len(bm.waiters) > 0 && rapid.Bool().Draw(t, "bitmap durable") {
				bm.resume(rapid.IntRange(0, len(bm.waiters)-1).Draw(t, "waiter"))
			}
			if bm != nil && rapid.Bool().Draw(t, "clear idle") {
				bm.clearIdle(rapid.IntRange(0, int(size/bm.regionSectors)).Draw(t, "region cleared"))
			}
		case 5: // a member dies
			m := rapid.IntRange(0, g.Members-1).Draw(t, "kill")
			if rapid.IntRange(0, 3).Draw(t, "really") == 0 && mayLose(m) {
				lost |= 1 << uint(m)
				w.members[m].dead = true
			}
		case 6: // time passes: operations older than the timeout are given up
			now += time.Duration(rapid.IntRange(1, 11).Draw(t, "dt")) * time.Second
			for _, e := range w.execs {
				e.Tick()
			}
		case 7: // an operation given up lands late
			if len(w.late) > 0 {
				i := rapid.IntRange(0, len(w.late)-1).Draw(t, "late")
				o := w.late[i]
				w.late = append(w.late[:i], w.late[i+1:]...)
				res := int32(0)
				if o.io.Kind == IORead || o.io.Kind == IOWrite {
					res = int32(o.io.Sectors) << 9
				}
				if o.io.Kind == IORead {
					for i := range o.data {
						o.data[i] = 0xee
					}
				} else if o.io.Kind == IOWrite && !o.io.Log {
					m := w.members[o.io.Member]
					copy(m.data[o.io.Sector<<9:], o.data[:res])
				}
				w.execs[o.q].Done(o.tag, o.op, res)
			}
		}
		collect()
	}
	w.failHook = nil
	for len(w.late) > 0 || len(w.pending) > 0 {
		w.settle()
		for _, o := range w.late {
			w.execs[o.q].Done(o.tag, o.op, -5)
		}
		w.late = nil
	}
	w.settle()
	for bm != nil && len(bm.waiters) > 0 {
		bm.resume(0)
		w.settle()
	}
	collect()
	if bm != nil {
		for r, c := range bm.inFlight {
			if c != 0 {
				t.Fatalf("bitmap region %d: %d writes never ended", r, c)
			}
		}
		if bm.starts != bm.ends {
			t.Fatalf("bitmap: %d writes started, %d ended", bm.starts, bm.ends)
		}
	}
	for q := range inflight {
		for tag, f := range inflight[q] {
			if f != nil {
				t.Fatalf("queue %d request %d (%v %d+%d) never completed", q, tag, f.op, f.sector, f.sectors)
			}
		}
	}
	w.lockFree(t)
	if !failures {
		if w.stale != 0 {
			t.Fatalf("%d member results taken for stale", w.stale)
		}
		for m, ms := range w.arr.State().Members {
			if ms.State != MemberActive && lost&(1<<uint(m)) == 0 {
				t.Fatalf("member %d %v, but it never failed", m, ms.State)
			}
		}
		if lost == 0 {
			w.parityConsistent(t)
		}
	}
	// Everything reads back, through reconstruction where members are
	// lost: kill those that failed an operation, too. Past the parity's
	// cover (pModelFailures) a sector may fail to read, and one a failed
	// write left unknown may read anything.
	for m := range g.Members {
		w.members[m].dead = w.members[m].dead || lost&(1<<uint(m)) != 0
	}
	buf := make([]byte, maxSectors<<9)
	for s := uint64(0); s < size; s += maxSectors {
		n := uint32(min(maxSectors, size-s))
		if !failures {
			if err := w.do(t, 0, ReqRead, s, n, buf); err != nil {
				t.Fatalf("final read %d+%d: %v", s, n, err)
			}
			if !bytes.Equal(buf[:n<<9], ref[s<<9:(s+uint64(n))<<9]) {
				t.Fatalf("final read %d+%d: wrong data (members lost %b)", s, n, lost)
			}
			continue
		}
		for k := range uint64(n) {
			if err := w.do(t, 0, ReqRead, s+k, 1, buf); err != nil {
				continue
			}
			if !unknown[s+k] && !bytes.Equal(buf[:512], ref[(s+k)<<9:(s+k+1)<<9]) {
				t.Fatalf("final read %d: wrong data (members lost %b, state %+v)", s+k, lost, w.arr.State().Members)
			}
		}
	}
}

// overlay is ref's sectors [sector, sector+n) with write f's data over
// those it writes.
func overlay(ref []byte, f *pInflight, sector uint64, n uint32) []byte {
	b := append([]byte(nil), ref[sector<<9:(sector+uint64(n))<<9]...)
	for s := sector; s < sector+uint64(n); s++ {
		if s >= f.sector && s < f.sector+uint64(f.sectors) {
			copy(b[(s-sector)<<9:(s-sector+1)<<9], f.buf[(s-f.sector)<<9:(s-f.sector+1)<<9])
		}
	}
	return b
}
