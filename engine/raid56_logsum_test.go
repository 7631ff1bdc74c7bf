package engine

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// The fields-only sum Encode uses is the whole header's sum whenever the
// reserved bytes are zero, for any field values and any starting CRC.
func TestParityLogFieldsSumIsHeaderSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := make([]byte, ParityLogHeaderSize)
	for range 2000 {
		for i := range plOffReserved {
			h[i] = byte(rng.Uint32())
		}
		if got, want := parityLogFieldsSum(h), parityLogHeaderSum(h); got != want {
			t.Fatalf("fields sum %#08x, header sum %#08x", got, want)
		}
	}
	for _, n := range []int{1, 7, 4096} {
		z, m := make([]byte, n), newCRCZeros(n)
		for range 200 {
			c := rng.Uint32()
			if got, want := m.apply(c), crc32.Update(c, castagnoli, z); got != want {
				t.Fatalf("%d zeros after %#08x: %#08x, want %#08x", n, c, got, want)
			}
		}
	}
	// A non-zero reserved byte changes the real sum, so decoding still
	// catches it (DecodeParityLogEntry sums the whole header).
	h[ParityLogHeaderSize-1] = 1
	if parityLogFieldsSum(h) == parityLogHeaderSum(h) {
		t.Fatal("a reserved byte did not change the header's sum")
	}
}

func BenchmarkParityLogHeaderSum(b *testing.B) {
	h := make([]byte, ParityLogHeaderSize)
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			parityLogHeaderSum(h)
		}
	})
	b.Run("fields", func(b *testing.B) {
		for b.Loop() {
			parityLogFieldsSum(h)
		}
	})
}
