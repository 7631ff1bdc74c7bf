package engine

import (
	"errors"
	"fmt"

	"github.com/klauspost/reedsolomon"
)

// Parity computes md's raid5 and raid6 parity over one stripe's chunks:
// P = D0 ^ D1 ^ ... and, for raid6, Q = g^0·D0 ^ g^1·D1 ^ ... over GF(2^8)
// with md's polynomial 0x11d and generator g = 2, the data chunks taken in
// md's syndrome order (StripeMap.Slot). The arithmetic is
// klauspost/reedsolomon's (SIMD where the CPU has it) with a custom
// matrix whose parity rows are exactly those sums, so its parity shards
// are md's P and Q bytes. Compute and Update do not allocate. Use one
// Parity per queue thread, as everything on the I/O path.
type Parity struct {
	enc  reedsolomon.Encoder
	data int
	q    bool
}

// gfMul2 multiplies by the generator 2 in md's GF(2^8) (polynomial 0x11d).
func gfMul2(b byte) byte {
	if b&0x80 != 0 {
		return b<<1 ^ 0x1d
	}
	return b << 1
}

// NewParity returns the parity of stripes with data data chunks, with Q
// (raid6) or without (raid5).
func NewParity(data int, q bool) (*Parity, error) {
	if data < 1 || data > MaxMembers-2 {
		return nil, fmt.Errorf("parity over %d data chunks: want 1 to %d", data, MaxMembers-2)
	}
	rows := [][]byte{make([]byte, data)}
	if q {
		rows = append(rows, make([]byte, data))
	}
	g := byte(1)
	for i := range data {
		rows[0][i] = 1
		if q {
			rows[1][i] = g
		}
		g = gfMul2(g)
	}
	enc, err := reedsolomon.New(data, len(rows), reedsolomon.WithCustomMatrix(rows))
	if err != nil {
		return nil, fmt.Errorf("parity encoder: %w", err)
	}
	return &Parity{enc: enc, data: data, q: q}, nil
}

// Data is the number of data chunks per stripe.
func (p *Parity) Data() int { return p.data }

// Count is the number of parity chunks: 1 (P) or 2 (P, Q).
func (p *Parity) Count() int {
	if p.q {
		return 2
	}
	return 1
}

var errParityShape = errors.New("parity: chunks of different sizes, or the wrong number of them")

func (p *Parity) check(data, parity [][]byte) error {
	if len(data) != p.data || len(parity) != p.Count() {
		return errParityShape
	}
	n := len(parity[0])
	for _, b := range parity {
		if len(b) != n {
			return errParityShape
		}
	}
	for _, b := range data {
		if len(b) != n {
			return errParityShape
		}
	}
	return nil
}

// Compute sets parity (P, then Q for raid6) from data, given in syndrome
// order; all chunks the same size.
func (p *Parity) Compute(data, parity [][]byte) error {
	if err := p.check(data, parity); err != nil {
		return err
	}
	for _, b := range parity {
		clear(b)
	}
	for i, d := range data {
		if err := p.enc.EncodeIdx(d, i, parity); err != nil {
			return err
		}
	}
	return nil
}

// Update adds to parity the change of the data chunk in syndrome slot:
// delta is old ^ new data (read-modify-write: P ^= delta, Q ^= g^slot·delta).
func (p *Parity) Update(delta []byte, slot int, parity [][]byte) error {
	if slot < 0 || slot >= p.data || len(parity) != p.Count() {
		return errParityShape
	}
	for _, b := range parity {
		if len(b) != len(delta) {
			return errParityShape
		}
	}
	return p.enc.EncodeIdx(delta, slot, parity)
}

// Reconstruct fills the missing chunks (nil entries, which need their
// capacity or are allocated) of shards: data in syndrome order, then P,
// then Q. At most Count() may be missing.
func (p *Parity) Reconstruct(shards [][]byte) error {
	if len(shards) != p.data+p.Count() {
		return errParityShape
	}
	return p.enc.Reconstruct(shards)
}

// ReconstructData is Reconstruct for the data chunks only: missing parity
// chunks stay missing (nil is fine for them).
func (p *Parity) ReconstructData(shards [][]byte) error {
	if len(shards) != p.data+p.Count() {
		return errParityShape
	}
	return p.enc.ReconstructData(shards)
}
