package array

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// The write-hole log's checkpoint lives only in the members' log
// headers. When none of them decodes (torn, damaged), which entries are
// live is unknown, and a dead entry replayed (its write long durable,
// its rows changed since by a write whose own entry is gone from another
// queue's ring) would put back a parity of the stripe's old data. So
// nothing is replayed when nothing needs it (the array in sync: its
// resync recomputes the parity). Here: the dead entry of stripe 1
// (checkpoint past it), then d0's rows rewritten and P made right (a
// later durable write), then every header torn. After assembly, P must
// still be the parity of the data on disk.
func TestTornLogHeadersReplayNothing(t *testing.T) {
	for _, reset := range []bool{false, true} {
		// reset: one member's header holds checkpoint 1, as resetLogArea
		// leaves a device that just took a role (re-add, spare) until the
		// next checkpoint, the others torn by the power cut (one round of
		// writeLogCheckpoint: with 3 members the reset one can be alone
		// in the round that was not written). A checkpoint of 1 next to
		// a torn header tells nothing either.
		t.Run(map[bool]string{false: "all-torn", true: "reset-beside-torn"}[reset], func(t *testing.T) {
			rng := rand.New(rand.NewSource(7))
			tw := tornRaid5Write(t, rng, true, 1<<40)
			g, sm := tw.g, tw.sm
			// A later durable write: d0's rows new, P the parity of the data.
			newD0 := make([]byte, tw.n)
			rng.Read(newD0)
			p := make([]byte, tw.n)
			for m, path := range tw.paths {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				row := b[tw.off : tw.off+int64(tw.n)]
				if m == tw.d0 {
					row = newD0
				}
				if m != sm.P {
					for i := range p {
						p[i] ^= row[i]
					}
				}
			}
			writeFileAt(t, tw.paths[tw.d0], tw.off, newD0)
			writeFileAt(t, tw.paths[sm.P], tw.off, p)
			hb := make([]byte, engine.ParityLogHeaderSize)
			h1 := engine.ParityLogHeader{Array: tw.sb.ArrayUUID, Checkpoint: 1}
			if err := h1.Encode(hb); err != nil {
				t.Fatal(err)
			}
			for m, path := range tw.paths {
				if reset && m != sm.P && m != tw.d0 && m != tw.d1 {
					writeFileAt(t, path, int64(tw.sb.LogOffset), hb)
					continue
				}
				writeFileAt(t, path, int64(tw.sb.LogOffset)+200, []byte{0xff}) // (its checksum fails)
			}
			a, err := Open(tw.paths, CreateSpec{Level: -1}, false)
			if err != nil {
				t.Fatalf("an array in sync with no log checkpoint refused: %v", err)
			}
			defer a.Close()
			x := make([]byte, tw.n)
			var pNow []byte
			for m := range g.Members {
				b, err := a.Members[m].ReadBlock(tw.off, tw.n)
				if err != nil {
					t.Fatal(err)
				}
				if m == sm.P {
					pNow = b
					continue
				}
				for i := range x {
					x[i] ^= b[i]
				}
			}
			if !bytes.Equal(x, pNow) {
				t.Fatalf("no log checkpoint: the dead entry (seq %d) was replayed over a later durable write; P of stripe 1 no longer matches its data (warnings %q)", tw.seq, a.Warnings)
			}
		})
	}
}

// writeFileAt writes b at off of the file at path.
func writeFileAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// As above with a member gone too: a dirty degraded array whose log has
// no header to tell its live entries is refused before anything is
// written (md's dirty degraded refusal), and starts when forced.
func TestTornLogHeadersDirtyDegradedRefused(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	tw := tornRaid5Write(t, rng, true, 0)
	for _, path := range tw.paths {
		writeFileAt(t, path, int64(tw.sb.LogOffset)+200, []byte{0xff})
	}
	var give []string
	for m, p := range tw.paths {
		if m != tw.d0 {
			give = append(give, p)
		}
	}
	before := contents(t, give...)
	a, err := Open(give, CreateSpec{Level: -1}, false)
	if err == nil {
		a.Close()
		t.Fatal("a dirty degraded array with no log header assembled")
	}
	if !errors.Is(err, engine.ErrDirtyDegraded) {
		t.Fatalf("refused with %v, want ErrDirtyDegraded", err)
	}
	unchanged(t, "the refused assembly", give, before)
	a, err = Open(give, CreateSpec{Level: -1, Force: true}, false)
	if err != nil {
		t.Fatalf("forced: %v", err)
	}
	a.Close()
}
