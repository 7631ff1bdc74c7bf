package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// mdSyndrome is md's generic raid6 gen_syndrome (lib/raid6/int.uc), byte by
// byte: Horner's rule from the highest data disk down, so that
// Q = sum of 2^z · D_z over GF(2^8) mod 0x11d, and P the XOR.
func mdSyndrome(data [][]byte, p, q []byte) {
	z0 := len(data) - 1
	for i := range p {
		wp, wq := data[z0][i], data[z0][i]
		for z := z0 - 1; z >= 0; z-- {
			wd := data[z][i]
			wp ^= wd
			wq = gfMul2(wq) ^ wd
		}
		p[i] = wp
		if q != nil {
			q[i] = wq
		}
	}
}

func randChunks(r *rand.Rand, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, size)
		for j := range out[i] {
			out[i][j] = byte(r.Uint32())
		}
	}
	return out
}

func TestParityMatchesMDSyndrome(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, nd := range []int{1, 2, 3, 4, 7, 8, 15, 16, 62} {
		for _, q := range []bool{false, true} {
			p, err := NewParity(nd, q)
			if err != nil {
				t.Fatal(err)
			}
			size := 4096 + 64*nd // not a power of two: the SIMD tails too
			data := randChunks(r, nd, size)
			parity := randChunks(r, p.Count(), size) // garbage: Compute overwrites
			if err := p.Compute(data, parity); err != nil {
				t.Fatal(err)
			}
			wantP, wantQ := make([]byte, size), make([]byte, size)
			if !q {
				wantQ = nil
			}
			mdSyndrome(data, wantP, wantQ)
			if !bytes.Equal(parity[0], wantP) {
				t.Fatalf("%d data: P differs from md's", nd)
			}
			if q && !bytes.Equal(parity[1], wantQ) {
				t.Fatalf("%d data: Q differs from md's", nd)
			}
			// Read-modify-write of each slot gives what Compute gives.
			for slot := range nd {
				nw := randChunks(r, 1, size)[0]
				delta := make([]byte, size)
				for i := range delta {
					delta[i] = data[slot][i] ^ nw[i]
				}
				if err := p.Update(delta, slot, parity); err != nil {
					t.Fatal(err)
				}
				data[slot] = nw
			}
			mdSyndrome(data, wantP, wantQ)
			if !bytes.Equal(parity[0], wantP) || q && !bytes.Equal(parity[1], wantQ) {
				t.Fatalf("%d data, q %v: parity after Update differs from md's", nd, q)
			}
			// Any Count() chunks lost come back.
			all := append(append([][]byte{}, data...), parity...)
			for a := range all {
				for b := a; b < len(all); b++ {
					if !q && b != a || nd > 16 && b != a && b != len(all)-1 {
						continue // raid5 loses one; wide stripes: a sample of pairs
					}
					shards := append([][]byte{}, all...)
					shards[a], shards[b] = nil, nil
					if err := p.Reconstruct(shards); err != nil {
						t.Fatalf("%d data: lose %d and %d: %v", nd, a, b, err)
					}
					for i := range all {
						if !bytes.Equal(shards[i], all[i]) {
							t.Fatalf("%d data: lose %d and %d: chunk %d differs", nd, a, b, i)
						}
					}
				}
			}
		}
	}
}

func TestParityDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p, err := NewParity(4, true)
	if err != nil {
		t.Fatal(err)
	}
	data, parity := randChunks(r, 4, 65536), randChunks(r, 2, 65536)
	if n := testing.AllocsPerRun(20, func() { p.Compute(data, parity) }); n != 0 {
		t.Errorf("Compute: %v allocations per call", n)
	}
	if n := testing.AllocsPerRun(20, func() { p.Update(data[0], 2, parity) }); n != 0 {
		t.Errorf("Update: %v allocations per call", n)
	}
	if err := p.Compute(data[:3], parity); err == nil {
		t.Error("Compute with 3 data chunks of a 4-data parity accepted")
	}
	if err := p.Update(data[0], 4, parity); err == nil {
		t.Error("Update of slot 4 of 4 accepted")
	}
	if _, err := NewParity(0, false); err == nil {
		t.Error("NewParity(0) accepted")
	}
}

// BenchmarkParity: P+Q of one 64 KiB-chunk stripe; SetBytes is the data
// bytes, so MB/s is data throughput per core.
func BenchmarkParity(b *testing.B) {
	for _, nd := range []int{4, 8} {
		for _, q := range []bool{false, true} {
			name := fmt.Sprintf("data=%d/P", nd)
			if q {
				name += "Q"
			}
			b.Run(name, func(b *testing.B) {
				r := rand.New(rand.NewPCG(5, 6))
				p, err := NewParity(nd, q)
				if err != nil {
					b.Fatal(err)
				}
				data, parity := randChunks(r, nd, 65536), randChunks(r, p.Count(), 65536)
				b.SetBytes(int64(nd * 65536))
				b.ReportAllocs()
				for b.Loop() {
					p.Compute(data, parity)
				}
			})
		}
	}
}
