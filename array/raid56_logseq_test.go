package array

import (
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
// a header may hold (engine.MaxParityLogCheckpoint) leaves the run numbers to
// go on with; one past it (crafted, damaged) is not taken as the
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
