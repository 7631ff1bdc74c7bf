package engine

import (
	"testing"

	"pgregory.net/rapid"
)

// The ring never hands out bytes of a live entry again, nor bytes
// outside it, nor an entry across its end; it fills (refuses) only when
// the live entries leave no room; entries are freed in order below the
// checkpoint. Checked against a model of the live entries' byte ranges.
func TestParityLogRing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pages := rapid.Uint64Range(1, 32).Draw(t, "pages")
		start := rapid.Uint64Range(1, 8).Draw(t, "start page") * 4096
		maxEntry := int(rapid.Uint64Range(1, pages).Draw(t, "max pages") * 4096)
		r, err := NewParityLogRing(start, pages*4096, maxEntry)
		if err != nil {
			t.Fatal(err)
		}
		type live struct{ seq, off, n uint64 }
		var lives []live
		seq, checkpoint := uint64(1), uint64(1)
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			if rapid.Bool().Draw(t, "take") {
				n := rapid.IntRange(1, maxEntry).Draw(t, "bytes")
				off, ok := r.Take(seq, n)
				if ok {
					size := roundUp(uint64(n), 4096)
					if off < start || off+size > start+pages*4096 || off%4096 != 0 {
						t.Fatalf("entry %d at %d+%d: outside the ring [%d, %d)", seq, off, size, start, start+pages*4096)
					}
					for _, l := range lives {
						if off < l.off+l.n && l.off < off+size {
							t.Fatalf("entry %d at %d+%d over live entry %d at %d+%d", seq, off, size, l.seq, l.off, l.n)
						}
					}
					lives = append(lives, live{seq, off, size})
				} else {
					// Refused: the live entries must leave no room for it
					// in one piece after the newest (or an empty ring
					// would have taken it).
					if len(lives) == 0 {
						t.Fatalf("an empty ring of %d pages refused %d bytes", pages, n)
					}
				}
				seq++
			} else {
				checkpoint = rapid.Uint64Range(checkpoint, seq).Draw(t, "checkpoint")
				r.Free(checkpoint)
				for len(lives) > 0 && lives[0].seq < checkpoint {
					lives = lives[1:]
				}
			}
			if o, ok := r.Oldest(); ok != (len(lives) > 0) || ok && o != lives[0].seq {
				t.Fatalf("oldest %d %v, live %v", o, ok, lives)
			}
		}
		// Everything freed: the ring takes an entry of the largest size.
		r.Free(seq)
		if r.Used() != 0 {
			t.Fatalf("all freed, %d bytes used", r.Used())
		}
		if _, ok := r.Take(seq, maxEntry); !ok {
			t.Fatal("an empty ring refused the largest entry")
		}
	})
}

func TestParityLogRingRefuses(t *testing.T) {
	if _, err := NewParityLogRing(4096, 8192, 8193); err == nil {
		t.Fatal("a ring smaller than its largest entry")
	}
	if _, err := NewParityLogRing(100, 8192, 4096); err == nil {
		t.Fatal("a ring not on a page")
	}
	r, err := NewParityLogRing(4096, 4*4096, 4*4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Take(1, 3*4096); !ok {
		t.Fatal("3 pages of 4")
	}
	if _, ok := r.Take(2, 2*4096); ok {
		t.Fatal("2 pages with 1 free")
	}
	r.Free(2)
	if off, ok := r.Take(3, 2*4096); !ok || off != 4096 {
		t.Fatalf("after the free: %d %v, want the ring's start (the end's page skipped)", off, ok)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := r.Take(r.live[0].seq+1000, 4096); ok {
			r.Free(1 << 62)
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
