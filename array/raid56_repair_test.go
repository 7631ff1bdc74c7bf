package array

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// TestParityReadRepair: a read error of a member's rows (a bad sector)
// is answered from the reconstruction through the real queue handler,
// the member stays in the array, and the read-repair worker rewrites the
// rows from the others (md's raid5 read error path), with the stripe
// locked.
func TestParityReadRepair(t *testing.T) {
	for _, tc := range []struct {
		level   engine.Level
		members int
	}{{engine.Level5, 4}, {engine.Level6, 5}} {
		t.Run(fmt.Sprintf("%s-%d", tc.level, tc.members), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.members)))
			paths := memberFiles(t, tc.members, 16<<20)
			spec := CreateSpec{Level: tc.level, ChunkSectors: 16, RegionSectors: 128}
			a, err := Open(paths, spec, true)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { a.Close() }()
			if err := a.SetClean(false); err != nil {
				t.Fatal(err)
			}
			g := *a.Engine.Parity
			r := &pRing{done: map[uint16]error{}}
			h := a.newQueue(r)
			const span = 1024
			ref := make([]byte, g.ArraySectors()<<9)
			var id uint64
			for range 10 {
				pBatch(t, rng, h, r, ref, span, &id)
			}
			a.WaitSync() // the first writes' resync: parity trusted
			// Array sectors 40..47 lie in one data chunk: its member's
			// rows go bad (garbage on the device, and reads of them fail).
			_, _, mem, msec := g.LocateData(40)
			bad := pageBuf(8 << 9)
			rng.Read(bad)
			if err := a.Members[mem].WriteAt(bad, int64(a.dataOffset+msec<<9)); err != nil {
				t.Fatal(err)
			}
			r.failOn = func(io engine.MemberIO) bool {
				return io.Kind == engine.IORead && int(io.Member) == mem && io.Sector < msec+8 && io.Sector+uint64(io.Sectors) > msec
			}
			buf := pageBuf(16 << 9)
			// (Tag 0's last answer is pBatch's: this read may wait for
			// the stripe lock, held by the repair it asks for.)
			delete(r.done, 0)
			h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: 36, Sectors: 16, Buf: buf})
			pServe(t, rng, h, r, []uint16{0})
			if err := r.done[0]; err != nil || !bytes.Equal(buf, ref[36<<9:52<<9]) {
				t.Fatalf("read over a bad sector: %v, right %v", err, err == nil && bytes.Equal(buf, ref[36<<9:52<<9]))
			}
			r.failOn = nil
			if s := a.Engine.State().Members[mem].State; s != engine.MemberActive {
				t.Fatalf("member %d with a bad sector is %v: want it kept and repaired", mem, s)
			}
			deadline := time.Now().Add(10 * time.Second)
			for a.ReadRepairs() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the bad rows were not rewritten")
				}
				time.Sleep(time.Millisecond)
			}
			got := pageBuf(8 << 9)
			if err := a.Members[mem].ReadAt(got, int64(a.dataOffset+msec<<9)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, ref[40<<9:48<<9]) {
				t.Fatalf("member %d's rows after the repair are not the data", mem)
			}
			pConsistent(t, a, span)
			pReadAll(t, rng, h, r, ref, span)
		})
	}
}
