package array

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// The write-hole log header's checkpoint read from disk becomes the
// first run-time entry number (recoverParityLog: a.logNext). The largest
// a header may hold (engine.MaxParityLogCheckpoint) is renumbered from 1
// (past engine.ParityLogRenumberAt); one past it (crafted, damaged) is not taken as the
// checkpoint (no header then decodes: nothing is replayed, the array was
// clean). Either way the writes after assembly go through: no number
// wraps, which would fail every logged write, or number entries below
// the persisted checkpoint (dead at the next recovery: the write hole
// silently open).
func TestParityLogHugeCheckpoint(t *testing.T) {
	for _, cp := range []uint64{engine.MaxParityLogCheckpoint, engine.MaxParityLogCheckpoint + 1, math.MaxUint64} {
		t.Run(fmt.Sprint(cp), func(t *testing.T) { hugeCheckpoint(t, cp) })
	}
}

func hugeCheckpoint(t *testing.T, cp uint64) {
	{
		rng := rand.New(rand.NewSource(1))
		paths := memberFiles(t, 4, 16<<20)
		a, err := Open(paths, CreateSpec{Level: engine.Level5, ChunkSectors: 16}, true)
		if err != nil {
			t.Fatal(err)
		}
		off, uuid := int64(a.logOffset), a.logUUID
		a.WaitSync()
		a.Close()
		writeLogHeaders(t, paths, off, uuid, cp)
		a, err = Open(paths, CreateSpec{Level: -1}, false)
		if err != nil {
			t.Fatalf("a clean array with log header checkpoint %d refused: %v", cp, err)
		}
		if a.logNext > engine.MaxParityLogCheckpoint {
			t.Errorf("log header checkpoint %d taken: the run numbers from %d", cp, a.logNext)
		}
		r := &pRing{done: map[uint16]error{}}
		hq := a.newQueue(r)
		g := *a.Engine.Parity
		for i := 0; i < 4; i++ {
			buf := pageBuf(4096)
			rng.Read(buf)
			delete(r.done, 0)
			hq.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: uint64(i*8) % (g.ArraySectors() - 8), Sectors: 8, Buf: buf})
			pServe(t, rng, hq, r, []uint16{0})
			if err := r.done[0]; err != nil {
				a.Close()
				t.Fatalf("log header checkpoint %d accepted at assembly; write %d then fails: %v", cp, i, err)
			}
		}
		a.Close()
	}
}

// writeLogHeaders writes a write-hole log header of checkpoint cp at
// byte off of every member file.
func writeLogHeaders(t *testing.T, paths []string, off int64, uuid [16]byte, cp uint64) {
	t.Helper()
	b := make([]byte, engine.ParityLogHeaderSize)
	h := engine.ParityLogHeader{Array: uuid, Checkpoint: cp}
	if err := h.Encode(b); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// Found by review. A header checkpoint at the largest a header may hold
// (2^62 then) was taken as the run's first number, but every checkpoint
// that run wrote was past that largest, and the recovery passed over its
// entries: the next crash was not covered by the log (the dirty degraded
// raid5 below was refused; forced, its torn entry was not replayed).
// Now such numbers are renumbered from 1 at the assembly, and the run's
// entries replay.
func TestParityLogReplaysAfterHugeCheckpoint(t *testing.T) {
	for _, cp := range []uint64{engine.ParityLogRenumberAt + 1, engine.MaxParityLogCheckpoint} {
		t.Run(fmt.Sprint(cp), func(t *testing.T) {
			rng := rand.New(rand.NewSource(5))
			tw := tornRaid5WriteFrom(t, rng, true, 0, cp)
			var give []string
			for m, p := range tw.paths {
				if m != tw.d0 {
					give = append(give, p)
				}
			}
			a, err := Open(give, CreateSpec{Level: -1}, false)
			if err != nil {
				t.Fatalf("dirty degraded with the log (entry %d live): %v", tw.seq, err)
			}
			defer a.Close()
			if got := pReadOne(t, rng, a, tw.a0, tornHi-tornLo); !bytes.Equal(got, tw.old[tw.sm.Slot[tw.d0]]) {
				t.Fatal("the unwritten chunk's rows of the torn stripe do not read back as they were")
			}
		})
	}
}
