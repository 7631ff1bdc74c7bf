package engine

import (
	"bytes"
	"math/rand"
	"testing"
)

// RecoverParityKeepingP: a raid6 write torn at the crash (each written
// chunk, P and Q old or new, drawn), its written chunk j lost with the
// crash and a chunk i of its X lost too. Computed from the log, the
// on-disk P and the readable written chunks, P and Q rebuild chunk i as
// it was, and chunk j as what P implies: the new data when P was
// written.
func TestRecoverParityKeepingP(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const n = 512
	for iter := range 400 {
		nd := 2 + rng.Intn(5)
		p, err := NewParity(nd, true)
		if err != nil {
			t.Fatal(err)
		}
		old, neu := make([][]byte, nd), make([][]byte, nd)
		var written uint64
		for s := range nd {
			old[s] = make([]byte, n)
			rng.Read(old[s])
			neu[s] = old[s]
			if rng.Intn(2) == 0 {
				neu[s] = make([]byte, n)
				rng.Read(neu[s])
				written |= 1 << uint(s)
			}
		}
		if written == 0 || written == 1<<uint(nd)-1 {
			continue // (X or the written part empty: other paths)
		}
		x := (uint64(1)<<uint(nd) - 1) &^ written
		log := [][]byte{make([]byte, n), make([]byte, n)}
		if err := p.LogParity(old, x, log); err != nil {
			t.Fatal(err)
		}
		parOld := [][]byte{make([]byte, n), make([]byte, n)}
		parNew := [][]byte{make([]byte, n), make([]byte, n)}
		if err := p.Compute(old, parOld); err != nil {
			t.Fatal(err)
		}
		if err := p.Compute(neu, parNew); err != nil {
			t.Fatal(err)
		}
		// On disk: each written chunk old or new; P old or new.
		disk := make([][]byte, nd)
		for s := range nd {
			disk[s] = old[s]
			if written&(1<<uint(s)) != 0 && rng.Intn(2) == 0 {
				disk[s] = neu[s]
			}
		}
		pNew := rng.Intn(2) == 0
		pDisk := bytes.Clone(parOld[0])
		if pNew {
			pDisk = bytes.Clone(parNew[0])
		}
		var j, i int
		for j = rng.Intn(nd); written&(1<<uint(j)) == 0; j = rng.Intn(nd) {
		}
		for i = rng.Intn(nd); x&(1<<uint(i)) == 0; i = rng.Intn(nd) {
		}
		data := make([][]byte, nd)
		for s := range nd {
			if s != j && x&(1<<uint(s)) == 0 {
				data[s] = disk[s]
			}
		}
		out := [][]byte{make([]byte, n), make([]byte, n)}
		pKept := bytes.Clone(pDisk)
		if err := p.RecoverParityKeepingP(log, data, x, j, pDisk, out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out[0], pKept) {
			t.Fatalf("iter %d: P changed", iter)
		}
		// Rebuild i and j from the rest (as on disk) and P, Q.
		shards := make([][]byte, nd+2)
		for s := range nd {
			if s != i && s != j {
				shards[s] = bytes.Clone(disk[s])
			}
		}
		shards[nd], shards[nd+1] = out[0], out[1]
		if err := p.Reconstruct(shards); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(shards[i], old[i]) {
			t.Fatalf("iter %d: chunk %d of X not rebuilt as it was", iter, i)
		}
		allNew := pNew
		for s := range nd {
			if s != j && written&(1<<uint(s)) != 0 && !bytes.Equal(disk[s], neu[s]) {
				allNew = false
			}
		}
		if allNew && !bytes.Equal(shards[j], neu[j]) {
			t.Fatalf("iter %d: the lost written chunk does not read its new data, P and the others new", iter)
		}
	}
}
