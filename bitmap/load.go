package bitmap

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// LoadInfo describes what Load found, for the log and examine output.
type LoadInfo struct {
	// Geometry is the bitmap's layout (zero if no copy was usable).
	Geometry Geometry
	// Events is the newest header events seen on any copy of this array
	// (used or not; a header more than one generation ahead of the
	// superblock's is corrupt and left out): the bitmap's events are at least this, so a
	// generation written to a header but not to the superblocks (a crash
	// in between) is never reused.
	Events uint64
	// EventsCleared is the newest events cleared of the valid headers of
	// this array (used or not): the bitmap's.
	EventsCleared uint64
	// Seq is the newest batch sequence number among the usable copies.
	Seq uint64
	// Copies describes each input copy, in order.
	Copies []CopyInfo
	// Region counts by merged state.
	Dirty, Clean, NeverWritten int
	// AllDirty is set by Assemble when Load failed and every region was
	// made dirty; Err says why.
	AllDirty bool
	Err      error
}

// Assemble is Load with its fallback: when Load fails (corrupt, stale,
// missing or mismatched bitmap), it returns AllDirty instead, with
// info.AllDirty set and info.Err saying why (log it: "bitmap unusable:
// every region dirty"). The fallback keeps the region and block size of a
// header that was readable (else cfg's region size, or the default or the
// smallest larger one that fits the area, and cfg's block size, or 4096),
// and its events are above every header seen. The error is only for a cfg
// or opts that cannot make a bitmap.
func Assemble(cfg Config, copies [][]byte, opts Options) (*Bitmap, *LoadInfo, error) {
	b, info, err := Load(cfg, copies, opts)
	if err == nil || errors.Is(err, ErrInvalidConfig) {
		return b, info, err
	}
	info.AllDirty, info.Err = true, err
	if g := info.Geometry; g.Regions != 0 {
		cfg.RegionSectors, cfg.BlockSize = g.RegionSectors, g.BlockSize
	} else if cfg.BlockSize == 0 {
		cfg.BlockSize = 4096
	}
	cfg.Events = max(cfg.Events, info.Events)
	b, err = AllDirty(cfg, opts)
	if err != nil && cfg.RegionSectors == 0 {
		// The default region size does not fit the area: a larger one.
		for rs := DefaultRegionSectors(cfg.ArraySectors) << 1; rs <= 1<<62/SectorSize && err != nil; rs <<= 1 {
			cfg.RegionSectors = rs
			b, err = AllDirty(cfg, opts)
		}
	}
	if err != nil {
		return nil, info, err
	}
	return b, info, nil
}

// CopyInfo describes one member's copy.
type CopyInfo struct {
	// Err is why the copy was not used (nil: it was).
	Err error
	// Events is the copy's header events (0 without a valid header).
	Events uint64
	// BadBlocks are the data blocks of a used copy that failed to decode
	// (a torn write from a crash, or corruption); the other copies
	// supplied them. The copy is repaired by the first batch.
	BadBlocks []BlockError
}

// Load reads the bitmap from copies, the bytes of the reserved area (from
// cfg.AreaOffset, at least Geometry.UsedBytes long; nil for a member that
// could not be read) of the members whose superblocks are current (the
// in-sync and rebuilding members: a stale member's copy is never passed).
// cfg.Events is
// the superblock generation; cfg.RegionSectors is ignored and
// cfg.BlockSize is the smallest block size the members accept (0: any).
//
// A copy is used if its header is valid, belongs to the array, matches its
// size, and is not older than the superblock. Each region's state is the
// most cautious among the used copies' valid blocks (dirty over clean over
// never written): every copy is at least as cautious as the truth, whatever
// subset of the last batch's writes reached it. A data block that fails
// its checksum on every used copy, or no usable copy, is an error
// (wrapping ErrCorrupt, ErrStale, ErrMismatch or ErrNoBitmap, saying why for
// each member): the caller must then assemble with AllDirty.
//
// On success the dirty regions need sync (DirtyRegions, NeedsSync) and the
// first batch rewrites the whole copy, with the merged states and the
// newer of the header's and cfg's events, on every member; no write
// proceeds before it commits. The info is returned even with an error.
func Load(cfg Config, copies [][]byte, opts Options) (*Bitmap, *LoadInfo, error) {
	info := &LoadInfo{Copies: make([]CopyInfo, len(copies))}
	switch {
	case cfg.ArrayUUID == [16]byte{}:
		return nil, info, fmt.Errorf("%w: array UUID is zero", ErrInvalidConfig)
	case cfg.Events == 0:
		return nil, info, fmt.Errorf("%w: events is 0", ErrInvalidConfig)
	case cfg.ArraySectors == 0:
		return nil, info, fmt.Errorf("%w: array size is 0", ErrInvalidConfig)
	}
	type usable struct {
		i int
		g Geometry
	}
	var used []usable
	best := -1
	for i, area := range copies {
		ci := &info.Copies[i]
		if area == nil {
			ci.Err = errors.New("not read")
			continue
		}
		h, err := findHeader(area, cfg.AreaOffset, cfg.ArrayUUID)
		if err != nil {
			ci.Err = err
			continue
		}
		ci.Events = h.Events
		if h.Events > cfg.Events+1 {
			// A header is written at most one generation ahead of the
			// superblocks (the update's bitmap batch commits before its
			// superblock writes, and the next update takes that
			// generation again). Further ahead it is corrupt or crafted:
			// neither used nor let raise the array's events.
			ci.Err = fmt.Errorf("%w: header events %d are more than one update ahead of the superblock's %d", ErrCorrupt, h.Events, cfg.Events)
			continue
		}
		info.Events = max(info.Events, h.Events)
		info.EventsCleared = max(info.EventsCleared, h.EventsCleared)
		g, err := checkHeader(&h, &cfg, len(area))
		if err != nil {
			ci.Err = err
			continue
		}
		used = append(used, usable{i, g})
		if best < 0 || h.Events > info.Copies[used[best].i].Events {
			best = len(used) - 1
		}
	}
	if best < 0 {
		return nil, info, noCopy(info)
	}
	g := used[best].g
	n := 0
	for _, u := range used {
		if u.g != g {
			info.Copies[u.i].Err = fmt.Errorf("%w: its layout (%d regions of %d sectors, %d-byte blocks) differs from member %d's (%d regions of %d sectors, %d-byte blocks)",
				ErrMismatch, u.g.Regions, u.g.RegionSectors, u.g.BlockSize, used[best].i, g.Regions, g.RegionSectors, g.BlockSize)
			continue
		}
		used[n] = u
		n++
	}
	used = used[:n]
	info.Geometry = g

	image := make([]byte, g.Regions)
	for blk := HeaderBlocks; blk < g.Blocks(); blk++ {
		off := g.BlockOffset(blk) - g.AreaOffset
		ok := false
		for _, u := range used {
			states, seq, err := DecodeBlock(copies[u.i][off:], &g, blk)
			if err != nil {
				info.Copies[u.i].BadBlocks = append(info.Copies[u.i].BadBlocks, BlockError{blk, err})
				continue
			}
			ok = true
			info.Seq = max(info.Seq, seq)
			first, _ := g.BlockRegions(blk)
			for j, s := range states {
				image[first+j] = max(image[first+j], s)
			}
		}
		if !ok {
			var why []string
			for _, u := range used {
				bad := info.Copies[u.i].BadBlocks
				why = append(why, fmt.Sprintf("member %d: %v", u.i, bad[len(bad)-1].Err))
			}
			return nil, info, fmt.Errorf("%w: block %d (byte %d of the members) is unreadable on every member (%s); its regions' states are unknown",
				ErrCorrupt, blk, g.BlockOffset(blk), strings.Join(why, "; "))
		}
	}
	for _, s := range image {
		switch State(s) {
		case Dirty:
			info.Dirty++
		case Clean:
			info.Clean++
		default:
			info.NeverWritten++
		}
	}
	b, err := newBitmap(g, image, max(info.Events, cfg.Events), info.EventsCleared, info.Seq, opts)
	if err != nil {
		return nil, info, err
	}
	return b, info, nil
}

// checkHeader checks a valid header against the array and returns its
// layout.
func checkHeader(h *Header, cfg *Config, areaLen int) (Geometry, error) {
	if h.Events < cfg.Events {
		return Geometry{}, fmt.Errorf("%w: header events %d are older than the superblock's %d (the member missed updates)", ErrStale, h.Events, cfg.Events)
	}
	if h.ArraySectors != cfg.ArraySectors {
		return Geometry{}, fmt.Errorf("%w: the bitmap covers %d sectors, the array has %d", ErrMismatch, h.ArraySectors, cfg.ArraySectors)
	}
	if h.BlockSize < cfg.BlockSize {
		return Geometry{}, fmt.Errorf("%w: the bitmap is written in %d-byte blocks but the members need %d-byte blocks", ErrMismatch, h.BlockSize, cfg.BlockSize)
	}
	g, err := h.Geometry(cfg.AreaOffset, cfg.AreaBytes)
	if err != nil {
		return Geometry{}, err
	}
	if need := g.UsedBytes(); uint64(areaLen) < need {
		return Geometry{}, fmt.Errorf("only %d bytes of the area were read, the bitmap spans %d", areaLen, need)
	}
	return g, nil
}

// noCopy is Load's error when no copy is usable: it says why for each
// member and wraps every reason's sentinel (ErrCorrupt, ErrStale,
// ErrMismatch, ErrNoBitmap).
func noCopy(info *LoadInfo) error {
	if len(info.Copies) == 0 {
		return fmt.Errorf("%w: no copies to load", ErrNoBitmap)
	}
	e := &multiError{}
	var why []string
	for i, c := range info.Copies {
		why = append(why, fmt.Sprintf("member %d: %v", i, c.Err))
		for _, k := range []error{ErrCorrupt, ErrStale, ErrMismatch, ErrNoBitmap} {
			if errors.Is(c.Err, k) && !slices.Contains(e.kinds, k) {
				e.kinds = append(e.kinds, k)
			}
		}
	}
	if len(e.kinds) == 0 {
		e.kinds = append(e.kinds, ErrNoBitmap)
	}
	e.msg = "no usable copy of the bitmap: " + strings.Join(why, "; ")
	return e
}

// multiError is an error with several sentinels.
type multiError struct {
	msg   string
	kinds []error
}

func (e *multiError) Error() string   { return e.msg }
func (e *multiError) Unwrap() []error { return e.kinds }
