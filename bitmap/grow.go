package bitmap

import (
	"errors"
	"fmt"
)

// Grown returns a bitmap for the same array grown to arraySectors (at
// least the current size), for an array that is not serving: no write in
// flight, no batch in flight, called on the flusher's thread (or with no
// flusher). The regions of the current size keep their states, merged
// when the region size doubles; the new address space is NeverWritten
// (md's grow with a bitmap: no initial sync of the added space). Where
// the regions at the current size would not fit in the reserved area
// (Config.AreaBytes, unchanged), the region size doubles until they do,
// as md doubles its bitmap chunk; a doubled region takes the most
// cautious state of the regions it merges (dirty over clean over never
// written), and a region that is written in part and never written in
// part (merged, or the last one, partly beyond the old end) is dirty: its
// copies are synced, as after a first write. The result's first batches rewrite the whole copy, header
// last, with the current events; a region that needed sync still does.
func (b *Bitmap) Grown(arraySectors uint64) (*Bitmap, error) {
	old := b.geo
	if arraySectors < old.ArraySectors {
		return nil, fmt.Errorf("%w: the bitmap cannot shrink from %d to %d sectors", ErrInvalidConfig, old.ArraySectors, arraySectors)
	}
	cfg := Config{ArrayUUID: old.ArrayUUID, ArraySectors: arraySectors, BlockSize: old.BlockSize,
		AreaOffset: old.AreaOffset, AreaBytes: old.AreaBytes, Events: b.events}
	var g Geometry
	for rs := old.RegionSectors; ; rs <<= 1 {
		if rs > 1<<62/SectorSize {
			return nil, fmt.Errorf("%w: no region size fits %d sectors in the %d-byte bitmap area", ErrInvalidConfig, arraySectors, old.AreaBytes)
		}
		cfg.RegionSectors = rs
		var err error
		if g, err = NewGeometry(cfg); err == nil {
			break
		} else if !errors.Is(err, ErrInvalidConfig) {
			return nil, err
		}
	}
	k := int(g.RegionSectors / old.RegionSectors)
	image := make([]byte, g.Regions)
	for i := range image {
		image[i] = byte(NeverWritten)
	}
	// never: the new region holds space never written (an old region
	// never written, or space the grow adds).
	never := make([]bool, g.Regions)
	for r, s := range b.image {
		st := State(s)
		if b.words[r].Load()&flagsSync != 0 {
			st = Dirty
		}
		if st == NeverWritten {
			never[r/k] = true
		}
		n := &image[r/k]
		*n = byte(moreCautious(State(*n), st))
	}
	if rs := g.RegionSectors; old.ArraySectors%rs != 0 && old.ArraySectors < arraySectors {
		never[old.ArraySectors/rs] = true // the last old region's new tail
	}
	// A region written in part and never written in part may hold
	// different leftovers in the rest: it needs sync, as after a first
	// write (Options.FirstWrite), or a clean region would differ.
	for i, st := range image {
		if never[i] && State(st) != NeverWritten {
			image[i] = byte(Dirty)
		}
	}
	nb, err := newBitmap(g, image, b.events, b.eventsCleared.Load(), b.seq, b.opts)
	if err != nil {
		return nil, err
	}
	nb.missing.Store(b.missing.Load())
	return nb, nil
}

// moreCautious is the state of a merged region: dirty over clean over
// never written.
func moreCautious(a, b State) State {
	rank := func(s State) int {
		switch s {
		case Dirty:
			return 2
		case Clean:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
