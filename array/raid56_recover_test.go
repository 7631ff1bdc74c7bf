package array

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// The write hole closed at assembly: a raid5 write of one data chunk's
// rows reached its member but not P (torn by a crash), with its log
// entry on P's member. Assembly replays the entry (P recomputed from the
// entry and the data on disk), advances the checkpoint past it, and a
// member lost afterwards rebuilds from the right parity: the rows of a
// chunk nobody wrote read back as their old data. Without the entry the
// same crash reads back wrong (the tear is real), and an entry below the
// checkpoint is not replayed.
func TestParityLogRecoveryAtAssembly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry bool
		seq   uint64
	}{{"replayed", true, 0}, {"no entry", false, 0}, {"entry below the checkpoint", true, 1 << 40}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(3))
			tw := tornRaid5Write(t, rng, tc.entry, tc.seq)
			paths, g, sb, sm, d0, d1, seq := tw.paths, tw.g, tw.sb, tw.sm, tw.d0, tw.d1, tw.seq
			off, n, old, newD1, a0 := tw.off, tw.n, tw.old, tw.newD1, tw.a0
			const hi, lo = tornHi, tornLo
			a, err := Open(paths, CreateSpec{Level: -1}, false)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { a.Close() }()
			replayedMsg := false
			for _, w := range a.Warnings {
				replayedMsg = replayedMsg || strings.Contains(w, "parity of 1 interrupted writes recomputed")
			}
			hb, err := a.Members[0].ReadBlock(int64(sb.LogOffset), engine.ParityLogHeaderSize)
			if err != nil {
				t.Fatal(err)
			}
			hd, err := engine.DecodeParityLogHeader(hb, sb.ArrayUUID)
			if err != nil {
				t.Fatal(err)
			}
			switch tc.name {
			case "replayed":
				if !replayedMsg || hd.Checkpoint != seq+1 {
					t.Fatalf("warnings %q, checkpoint %d: want the entry replayed and the checkpoint past it", a.Warnings, hd.Checkpoint)
				}
			default:
				if replayedMsg {
					t.Fatalf("replayed: %q", a.Warnings)
				}
			}
			{
				chunks := make([][]byte, g.Members)
				x := make([]byte, n)
				for m := range g.Members {
					chunks[m], _ = a.Members[m].ReadBlock(off, n)
					if m != sm.P {
						for i := range x {
							x[i] ^= chunks[m][i]
						}
					}
				}
				// Replayed: P is the parity of the data on disk (d1 new).
				if consistent := bytes.Equal(x, chunks[sm.P]); consistent != (tc.name == "replayed") || !bytes.Equal(chunks[d1], newD1) {
					t.Fatalf("%s: P of the torn rows consistent after assembly: %v", tc.name, consistent)
				}
			}
			// The resync of the dirty regions is not let run: the member
			// is lost first (as in the model's sequence).
			a.StopSync()
			if err := a.Fail(d0); err != nil {
				t.Fatal(err)
			}
			right := bytes.Equal(pReadOne(t, rng, a, a0, hi-lo), old[sm.Slot[d0]])
			if right != (tc.name == "replayed") {
				t.Fatalf("%s: rows of the lost member's chunk read back right: %v", tc.name, right)
			}
		})
	}
}

// pReadOne reads array sectors [sector, sector+n) through a new queue of a.
func pReadOne(t *testing.T, rng *rand.Rand, a *Array, sector, n uint64) []byte {
	t.Helper()
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	buf := pageBuf(int(n) << 9)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: sector, Sectors: uint32(n), Buf: buf})
	pServe(t, rng, h, r, []uint16{0})
	if err := r.done[0]; err != nil {
		t.Fatal(err)
	}
	return buf
}

// A dirty degraded raid5 starts without force when its write-hole log
// replays every interrupted write (as md with PPL), and the chunk of the
// member missing since the crash reads back as it was, rebuilt from the
// replayed parity. When the missing member holds the chunk the
// interrupted write wrote, the array starts too (md with PPL starts it):
// that chunk may read anything (md's PPL: the written part of a stripe),
// the chunks the write did not touch read back as they were. (It was
// refused as a dirty degraded array until 2026-12-06.)
func TestParityDirtyDegradedStartsWithTheLog(t *testing.T) {
	for _, tc := range []struct {
		name    string
		missing func(tornWrite) int
	}{{"unwritten chunk missing", func(tw tornWrite) int { return tw.d0 }},
		{"written chunk missing", func(tw tornWrite) int { return tw.d1 }}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(5))
			tw := tornRaid5Write(t, rng, true, 0)
			miss := tc.missing(tw)
			var give []string
			for m, p := range tw.paths {
				if m != miss {
					give = append(give, p)
				}
			}
			a, err := Open(give, CreateSpec{Level: -1}, false)
			if err != nil {
				t.Fatalf("dirty degraded with the log: %v", err)
			}
			defer a.Close()
			started := false
			for _, w := range a.Warnings {
				started = started || strings.Contains(w, "started dirty and degraded (1 of 4 roles not in sync)")
			}
			if !started {
				t.Fatalf("warnings %q", a.Warnings)
			}
			if got := pReadOne(t, rng, a, tw.a0, tornHi-tornLo); !bytes.Equal(got, tw.old[tw.sm.Slot[tw.d0]]) {
				t.Fatal("the unwritten chunk's rows of the torn stripe do not read back as they were")
			}
		})
	}
}

// A torn raid5 write (TestParityLogRecoveryAtAssembly's): stripe
// tornStripe, rows tornLo..tornHi, data slot 1 (on d1) new on its member
// and P old, with (entry) its log entry on P's member, numbered belowCP
// (dead: the checkpoint is past it) or as a write in flight at the crash
// (belowCP 0); d0 holds the stripe's chunk nobody wrote (array sectors
// a0..). The array is closed as a crash leaves it.
type tornWrite struct {
	paths  []string
	g      engine.ParityGeometry
	sb     engine.Superblock
	sm     engine.StripeMap
	d0, d1 int
	seq    uint64
	off    int64
	n      int
	old    [][]byte // the stripe's data rows before the write, by slot
	newD1  []byte
	a0     uint64
}

const tornStripe, tornLo, tornHi = 1, 0, 8

func tornRaid5Write(t *testing.T, rng *rand.Rand, entry bool, belowCP uint64) tornWrite {
	t.Helper()
	return tornRaid5WriteFrom(t, rng, entry, belowCP, 0)
}

// tornRaid5WriteFrom is tornRaid5Write on an array whose log headers
// were given checkpoint cp (not 0) and which was assembled again before
// the writes.
func tornRaid5WriteFrom(t *testing.T, rng *rand.Rand, entry bool, belowCP, cp uint64) tornWrite {
	t.Helper()
	paths := memberFiles(t, 4, 16<<20)
	spec := CreateSpec{Level: engine.Level5, ChunkSectors: 16, RegionSectors: 128}
	a, err := Open(paths, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if cp != 0 {
		off, uuid := int64(a.logOffset), a.logUUID
		a.WaitSync()
		if err := a.SetClean(true); err != nil {
			t.Fatal(err)
		}
		a.Close()
		writeLogHeaders(t, paths, off, uuid, cp)
		if a, err = Open(paths, CreateSpec{Level: -1}, false); err != nil {
			t.Fatalf("log header checkpoint %d: %v", cp, err)
		}
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	g := *a.Engine.Parity
	sb := *a.SBs[0]
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	span := g.ChunkSectors * uint64(g.DataMembers()) * 4
	ref := make([]byte, g.ArraySectors()<<9)
	var id uint64
	for range 6 {
		pBatch(t, rng, h, r, ref, span, &id)
	}
	a.WaitSync()
	// The entries the writes logged are dead: the checkpoint
	// goes past them (as the checkpointer would).
	persistLogCheckpoint(t, a)
	seq := belowCP
	if seq == 0 {
		// The next entry's number, held by queue 0 as a write in
		// flight at the crash holds its own.
		seq = a.plog.clock.TakeN(1)
		a.plog.clock.SetOldest(0, seq)
	}
	if belowCP != 0 {
		// The checkpoint is past the entry: it is dead.
		b := make([]byte, engine.ParityLogHeaderSize)
		hd := engine.ParityLogHeader{Array: sb.ArrayUUID, Checkpoint: belowCP + 1}
		if err := hd.Encode(b); err != nil {
			t.Fatal(err)
		}
		for _, m := range a.Members {
			if err := m.WriteBlockSync(int64(sb.LogOffset), b); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The torn write: stripe 1, rows 0..8, data slot 1 new on its
	// member, P old.
	const stripe, lo, hi = tornStripe, tornLo, tornHi
	sm := g.Stripe(stripe)
	// d1: the member of data slot 1 (syndrome order), written;
	// d0: the member of the stripe's first data chunk in array
	// order, if that is not d1, else its second: not written.
	var d1 int
	for m := range g.Members {
		if sm.Slot[m] == 1 {
			d1 = m
		}
	}
	idx := uint64(0)
	if int(sm.Data[0]) == d1 {
		idx = 1
	}
	d0 := int(sm.Data[idx])
	off := int64(a.dataOffset + (stripe*g.ChunkSectors+lo)<<9)
	n := (hi - lo) << 9
	old := make([][]byte, g.DataMembers())
	for m := range g.Members {
		if s := sm.Slot[m]; s >= 0 {
			if old[s], err = a.Members[m].ReadBlock(off, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	newD1 := make([]byte, n)
	rng.Read(newD1)
	par, _ := engine.NewParity(g.DataMembers(), false)
	x := (uint64(1)<<uint(g.DataMembers()) - 1) &^ 2 // every slot but 1
	lp := make([]byte, n)
	if err := par.LogParity(old, x, [][]byte{lp}); err != nil {
		t.Fatal(err)
	}
	if entry {
		e := engine.ParityLogEntry{Array: sb.ArrayUUID, Seq: seq, Stripe: stripe, RowLo: lo, RowHi: hi, Logged: x, Written: 2, Parity: 1, P: lp}
		b := make([]byte, engine.ParityLogEntrySize(hi-lo, 1))
		if _, err := e.Encode(b, g); err != nil {
			t.Fatal(err)
		}
		if err := a.Members[sm.P].WriteBlockSync(int64(sb.LogOffset)+3*4096, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Members[d1].WriteBlockSync(off, newD1); err != nil {
		t.Fatal(err)
	}
	a.Close() // the crash: not stopped cleanly
	// Array sectors of d0's rows 0..8 in stripe 1.
	a0 := (stripe*uint64(g.DataMembers())+idx)*g.ChunkSectors + lo
	return tornWrite{paths: paths, g: g, sb: sb, sm: sm, d0: d0, d1: d1, seq: seq, off: off, n: int(n), old: old, newD1: newD1, a0: a0}
}

// persistLogCheckpoint writes the write-hole log's checkpoint now, as the
// checkpointer does in its time.
func persistLogCheckpoint(t *testing.T, a *Array) {
	t.Helper()
	cp := a.plog.clock.Checkpoint()
	var b []byte
	if ok, _ := a.writeLogCheckpoint(cp, &b); !ok {
		t.Fatal("write-hole log checkpoint not written")
	}
	a.plog.clock.SetPersisted(cp)
}

// offFailDev fails the writes at the offsets fail says.
// offFailDev fails (EIO) the writes at offsets fail says, and the reads
// at those failRead says (nil: none).
type offFailDev struct {
	Device
	fail     func(off int64) bool
	failRead func(off int64) bool
}

func (d offFailDev) ReadAt(p []byte, off int64) error {
	if d.failRead != nil && d.failRead(off) {
		return unix.EIO
	}
	return d.Device.ReadAt(p, off)
}

func (d offFailDev) WriteAt(p []byte, off int64) error {
	if d.fail(off) {
		return unix.EIO
	}
	return d.Device.WriteAt(p, off)
}

func (d offFailDev) WriteAtDurable(p []byte, off int64) error {
	if d.fail(off) {
		return unix.EIO
	}
	return d.Device.WriteAtDurable(p, off)
}

// A member whose writes fail while the write-hole log is replayed at
// assembly is failed (raid6 keeps going without it), the assembly goes
// on, and no checkpoint is written past the entries: they stay live for
// the next assembly.
func TestParityLogReplayWriteErrorFailsMember(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	paths := memberFiles(t, 5, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level6, ChunkSectors: 16}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	g := *a.Engine.Parity
	span := g.ChunkSectors * uint64(g.DataMembers()) * 8
	ref := make([]byte, g.ArraySectors()<<9)
	var id uint64
	// A write of another queue, out until the crash, holds every entry
	// live (no checkpoint passes 1).
	a.plog.clock.SetOldest(7, 1)
	for range 3 {
		pBatch(t, rng, h, r, ref, span, &id)
	}
	dataOff := int64(a.dataOffset)
	a.Close()
	spec := CreateSpec{Level: -1, OpenDevice: func(p string) (Device, error) {
		d, err := openFile(p)
		if err != nil || p != paths[0] {
			return d, err
		}
		return offFailDev{Device: d, fail: func(off int64) bool { return off >= dataOff }}, nil
	}}
	a, err = Open(paths, spec, false)
	if err != nil {
		t.Fatalf("assembly with a member failing the replay's writes: %v", err)
	}
	defer a.Close()
	if st := a.Engine.State().Members[0]; st.State == engine.MemberActive {
		t.Fatalf("role 0 (its replay writes failed) is %v", st.State)
	}
	failed := false
	for _, w := range a.Warnings {
		failed = failed || strings.Contains(w, "write-hole log: "+paths[0]+" failed")
	}
	if !failed {
		t.Fatalf("warnings %q", a.Warnings)
	}
	for r := 1; r < 5; r++ {
		hb, err := a.Members[r].ReadBlock(int64(a.logOffset), engine.ParityLogHeaderSize)
		if err != nil {
			t.Fatal(err)
		}
		if hd, err := engine.DecodeParityLogHeader(hb, a.logUUID); err != nil || hd.Checkpoint != 1 {
			t.Fatalf("role %d's log header %+v, %v: a checkpoint was written past entries whose replay failed", r, hd, err)
		}
	}
	r = &pRing{done: map[uint16]error{}}
	h = a.newQueue(r)
	pReadAll(t, rng, h, r, ref, span)
}
