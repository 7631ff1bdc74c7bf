package bitmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
)

// The on-disk format, version 2.
//
// Every member holds a full copy of the bitmap in its reserved area
// (engine.Superblock.BitmapOffset, BitmapBytes). The copy starts at the
// first multiple of BlockSize at or after the area's offset (so every
// bitmap I/O is a whole, aligned block) and is one header block followed by
// DataBlocks data blocks; it never extends past the area. All integers are
// little-endian. Checksums are CRC-32C (Castagnoli).
//
// Header block (block 0; rewritten only at create, assembly, when the
// superblock generation changes and before the first clear of a
// generation):
//
//	offset  size  field
//	     0     8  magic "ublkbmap"
//	     8     4  format version (2; 1 is read, see below)
//	    12     4  checksum: CRC-32C of the whole block with this field zero
//	    16     4  flags: none defined, must be 0
//	    20     4  block size in bytes (a power of two, 512..1 MiB)
//	    24     4  header blocks (1)
//	    28     4  data blocks
//	    32    16  array UUID
//	    48     8  events: the superblock generation this copy is current for (1..2^64-2)
//	    56     8  region size in 512-byte sectors (a power of two >= 128)
//	    64     8  regions: ceil(array sectors / region size)
//	    72     8  array sectors: the size of the address space covered
//	    80     4  states per data block: block size - 16
//	    84     8  events cleared: the generation in which a region was last
//	              cleared (1..events; version 2 only)
//	    92     …  zero to the end of the block
//
// Data block i (block 1+i) holds the state bytes of regions
// i*PerBlock .. (i+1)*PerBlock-1, then a 16-byte trailer:
//
//	offset          size  field
//	     0      PerBlock  one state byte per region (0 never written, 1 clean,
//	                      2 dirty); bytes past the last region are 0
//	PerBlock           8  sequence number of the batch that wrote the block
//	PerBlock+8         4  block index (1+i)
//	PerBlock+12        4  checksum: CRC-32C of the array UUID followed by the
//	                      block's first BlockSize-4 bytes
//
// Why one byte per region: every bitmap write is a whole block anyway, so
// density only changes how many blocks the bitmap has (65,536 regions, the
// default maximum, are 17 data blocks of 4 KiB: 68 KiB, tiny next to the
// 1 MiB+ reserve); three states need two bits and a byte leaves room for
// more (md's llbitmap also has needs-sync and syncing) without a format
// change; and the in-memory image is the on-disk bytes, so building a block
// is a copy, with no bit packing between regions that different batches
// change.
//
// Why a trailer per block: a block write torn by a crash (part new, part
// old sectors) fails its checksum, as does a block from another array
// (the UUID seeds the checksum) or written at another place (the index).
// The sequence number is informational (the newest batch per copy; loading
// continues the numbering). A torn or lost block write is harmless because
// every copy's states are always true or more cautious than the truth (see
// doc.go) and loading takes, per region, the most cautious state among the
// valid copies of the members that are in sync; a block with no valid copy
// on any member makes the bitmap unusable (Assemble then falls back to
// every region dirty: AllDirty).
//
// The header's events follow md's rule: before the superblocks are written
// with a new generation, the header is rewritten with it (SetEvents; wait
// for that batch to commit), so a copy whose header events are older than
// the superblock's belongs to a member that missed updates (it was missing
// or failed) and is not used (ErrStale).
//
// Events cleared is md's events_cleared, for re-add: the bitmap says dirty
// every region written since it was last cleared, and no region is cleared
// while a member is missing; so a member that left the array with
// superblock events E missed only writes to regions dirty now, unless a
// region was cleared in a generation after E (after it came back and left
// again, or after its role was given to another device), whose writes it
// may have missed and the bitmap no longer shows. A re-add copies only the
// dirty regions if E >= events cleared, else every written region. The
// header carrying a new events cleared G is durable on every present
// member before any region is cleared in generation G (so before any block
// saying it is clean is built; see Tick), so a copy's events cleared is
// never older than the clears its blocks show. Load takes the newest among
// the copies. Create sets it to the array's first generation, AllDirty
// (Assemble's fallback) to its events.
//
// Why a new version and not a flag or a bare field in the reserved bytes:
// builds that read version 1 refuse a header whose version, flags or
// reserved bytes they do not know (ErrCorrupt), and then assemble with
// every region dirty (Assemble's fallback: a full resync, a full copy on
// re-add) and rewrite the bitmap in version 1: they never misread it, and
// a version number says plainly which field layout a header has, where a
// flag would only say that one field is there. This build reads a version
// 1 header (whose bytes from 84 on are zero) as cleared at the header's
// own events: the clears it shows may be that recent, so only members not
// older than the header are re-added from the bitmap (conservative), and
// the first rewrite makes it version 2.
const (
	// Magic is the first 8 bytes of the header block.
	Magic = "ublkbmap"
	// Version is the format version this package writes; it also reads
	// VersionV1.
	Version = 2
	// VersionV1 is the format without events cleared.
	VersionV1 = 1
	// SectorSize is the unit of the ...Sectors fields.
	SectorSize = 512
	// MinBlockSize and MaxBlockSize bound the bitmap I/O size.
	MinBlockSize = 512
	MaxBlockSize = 1 << 20
	// TrailerSize is the size of a data block's trailer.
	TrailerSize = 16
	// MinRegionSectors is the smallest region: 64 KiB. Smaller regions only
	// multiply the bitmap's size and the number of clean-to-dirty
	// transitions (each one a wait), and a 512 KiB write would span 8.
	MinRegionSectors = 128
	// MaxRegions bounds the number of regions (about 40 bytes of memory
	// each, 1 byte on disk).
	MaxRegions = 1 << 20
	// DefaultMaxRegions is the number of regions the default region size
	// aims at (DefaultRegionSectors).
	DefaultMaxRegions = 1 << 16
	// DefaultMinRegionSectors is the smallest default region: 4 MiB.
	DefaultMinRegionSectors = 8192
)

// Header field offsets.
const (
	hMagic         = 0
	hVersion       = 8
	hChecksum      = 12
	hFlags         = 16
	hBlockSize     = 20
	hHeaderBlocks  = 24
	hDataBlocks    = 28
	hUUID          = 32
	hEvents        = 48
	hRegionSectors = 56
	hRegions       = 64
	hArraySectors  = 72
	hPerBlock      = 80
	hEventsCleared = 84
	hEnd           = 92
	hEndV1         = 84
)

// State is the state of a region, as stored on disk (one byte).
type State uint8

// Region states. A new array's regions are NeverWritten (no initial sync
// is needed: resync and rebuild skip them); the first write makes a region
// Dirty; a region goes Clean when it has had no write for the clear delay
// and all its writes completed on every member. A region never goes back
// to NeverWritten.
const (
	NeverWritten State = 0
	Clean        State = 1
	Dirty        State = 2
)

func (s State) String() string {
	switch s {
	case NeverWritten:
		return "never-written"
	case Clean:
		return "clean"
	case Dirty:
		return "dirty"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Errors. Load's and the decoders' errors wrap one of these; use errors.Is.
// Any of them from Load means the bitmap cannot be trusted: assemble with
// AllDirty.
var (
	// ErrInvalidConfig: a Config or Options that cannot make a bitmap.
	ErrInvalidConfig = errors.New("invalid bitmap configuration")
	// ErrNoBitmap: no header (no magic) in the area.
	ErrNoBitmap = errors.New("no bitmap")
	// ErrCorrupt: a header or block that fails its checksum or holds
	// impossible values, or a block that is unreadable on every member.
	ErrCorrupt = errors.New("corrupt bitmap")
	// ErrStale: the copy's header events are older than the superblock's
	// (the member missed updates).
	ErrStale = errors.New("stale bitmap")
	// ErrMismatch: a valid bitmap that does not belong to this array or
	// does not match its size or the members' block size.
	ErrMismatch = errors.New("bitmap does not match the array")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Config describes a bitmap and the reserved area holding it.
type Config struct {
	// ArrayUUID is the array's UUID (never zero).
	ArrayUUID [16]byte
	// ArraySectors is the size of the address space the bitmap covers, in
	// 512-byte sectors (the array's size for RAID 1 and 10, like md).
	ArraySectors uint64
	// RegionSectors is the region size in sectors: a power of two >=
	// MinRegionSectors; 0 means DefaultRegionSectors(ArraySectors). Load
	// ignores it (the header says).
	RegionSectors uint64
	// BlockSize is the bitmap I/O size (BlockSizeFor). At create it is the
	// block size of the new bitmap; at Load it is the smallest block size
	// the present members accept (0: any) and the header gives the actual
	// one.
	BlockSize int
	// AreaOffset and AreaBytes are the reserved area on every member
	// (Superblock.BitmapOffset, BitmapBytes): bytes from the member's start.
	AreaOffset, AreaBytes uint64
	// Events is the superblock generation (>= 1).
	Events uint64
}

// Geometry is the resolved layout of a bitmap.
type Geometry struct {
	ArrayUUID     [16]byte
	ArraySectors  uint64
	RegionSectors uint64
	Regions       int
	BlockSize     int
	// PerBlock is the number of regions per data block: BlockSize -
	// TrailerSize.
	PerBlock int
	// DataBlocks is the number of data blocks (after the one header block).
	DataBlocks int
	// AreaOffset and AreaBytes are the reserved area.
	AreaOffset, AreaBytes uint64
	// Start is the member byte offset of the header block: AreaOffset
	// rounded up to BlockSize.
	Start uint64
}

// HeaderBlocks is the number of header blocks (always 1).
const HeaderBlocks = 1

// MaxCopyBytes bounds the bytes of an area any valid copy spans
// (Geometry.UsedBytes): the alignment padding before the header (less than
// a block) and the blocks of MaxRegions regions, at the worst block size,
// rounded up to MaxBlockSize (a whole number of blocks of every size).
// Reading this much of a larger area is enough to Load or Examine it.
var MaxCopyBytes = maxCopyBytes()

func maxCopyBytes() uint64 {
	var most uint64
	for bs := uint64(MinBlockSize); bs <= MaxBlockSize; bs <<= 1 {
		blocks := HeaderBlocks + ceilDiv(MaxRegions, bs-TrailerSize)
		most = max(most, bs-1+blocks*bs)
	}
	return roundUp(most, MaxBlockSize)
}

// Blocks is the number of blocks of a copy: the header and the data blocks.
func (g *Geometry) Blocks() int { return HeaderBlocks + g.DataBlocks }

// BlockOffset is the member byte offset of block i (0 is the header).
func (g *Geometry) BlockOffset(i int) uint64 {
	return g.Start + uint64(i)*uint64(g.BlockSize)
}

// BlockOf is the block holding region r's state.
func (g *Geometry) BlockOf(r int) int { return HeaderBlocks + r/g.PerBlock }

// BlockRegions is the range [first, end) of regions whose states block i
// (>= 1) holds.
func (g *Geometry) BlockRegions(i int) (first, end int) {
	first = (i - HeaderBlocks) * g.PerBlock
	return first, min(first+g.PerBlock, g.Regions)
}

// UsedBytes is the number of bytes of the area, from AreaOffset, that the
// copy spans (alignment padding included): the bytes to read for Load.
func (g *Geometry) UsedBytes() uint64 {
	return g.Start - g.AreaOffset + uint64(g.Blocks())*uint64(g.BlockSize)
}

// Region returns the region holding sector (an address in the bitmap's
// address space).
func (g *Geometry) Region(sector uint64) int {
	return int(sector / g.RegionSectors)
}

// Layout checks cfg and returns the number of header and data blocks of
// its bitmap. It fails with a clear message (wrapping ErrInvalidConfig)
// when the block size or region size is not a power of two or out of
// range, or when the regions do not fit in the area (saying which region
// size would fit).
func Layout(cfg Config) (headerBlocks, dataBlocks int, err error) {
	g, err := NewGeometry(cfg)
	if err != nil {
		return 0, 0, err
	}
	return HeaderBlocks, g.DataBlocks, nil
}

// NewGeometry checks cfg (as Layout) and resolves its layout.
func NewGeometry(cfg Config) (Geometry, error) {
	g, err := newGeometry(cfg)
	if err != nil {
		return Geometry{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return g, nil
}

func newGeometry(cfg Config) (Geometry, error) {
	bs := cfg.BlockSize
	if bs < MinBlockSize || bs > MaxBlockSize || bs&(bs-1) != 0 {
		return Geometry{}, fmt.Errorf("bitmap block size %d is not a power of two from %d to %d", bs, MinBlockSize, MaxBlockSize)
	}
	if cfg.ArraySectors == 0 {
		return Geometry{}, errors.New("array size is 0 sectors")
	}
	if cfg.AreaOffset%SectorSize != 0 {
		return Geometry{}, fmt.Errorf("bitmap area offset %d is not a multiple of %d", cfg.AreaOffset, SectorSize)
	}
	rs := cfg.RegionSectors
	if rs == 0 {
		rs = DefaultRegionSectors(cfg.ArraySectors)
	}
	if rs&(rs-1) != 0 {
		return Geometry{}, fmt.Errorf("region size of %d sectors (%s) is not a power of two", rs, sizeString(rs*SectorSize))
	}
	if rs < MinRegionSectors {
		return Geometry{}, fmt.Errorf("region size of %d sectors (%s) is too small: the minimum is %s", rs, sizeString(rs*SectorSize), sizeString(MinRegionSectors*SectorSize))
	}
	if rs > 1<<62/SectorSize {
		return Geometry{}, fmt.Errorf("region size of %d sectors is too large", rs)
	}
	g, need, ok := fit(cfg, rs)
	if ok {
		return g, nil
	}
	// Find the smallest region size that fits.
	why := fmt.Sprintf("%d regions of %s", g.Regions, sizeString(rs*SectorSize))
	if g.Regions > MaxRegions {
		why += fmt.Sprintf(" (more than the maximum of %d regions)", MaxRegions)
	} else {
		why += fmt.Sprintf(" need %d blocks of %d bytes (%d bytes from the area's start), but the bitmap area is %d bytes", g.Blocks(), bs, need, cfg.AreaBytes)
	}
	for r := rs << 1; r <= 1<<62/SectorSize; r <<= 1 {
		if _, _, ok := fit(cfg, r); ok {
			return Geometry{}, fmt.Errorf("region size %s does not fit: %s; the smallest region size that fits is %s (%d sectors)", sizeString(rs*SectorSize), why, sizeString(r*SectorSize), r)
		}
		if r >= cfg.ArraySectors {
			break
		}
	}
	return Geometry{}, fmt.Errorf("region size %s does not fit: %s; no region size fits: the area must hold at least 2 blocks of %d bytes from offset %d", sizeString(rs*SectorSize), why, bs, g.Start)
}

// fit lays out cfg with region size rs and reports whether it fits in the
// area, and how many bytes from the area's start it needs.
func fit(cfg Config, rs uint64) (g Geometry, need uint64, ok bool) {
	bs := cfg.BlockSize
	g = Geometry{
		ArrayUUID:     cfg.ArrayUUID,
		ArraySectors:  cfg.ArraySectors,
		RegionSectors: rs,
		BlockSize:     bs,
		PerBlock:      bs - TrailerSize,
		AreaOffset:    cfg.AreaOffset,
		AreaBytes:     cfg.AreaBytes,
		Start:         roundUp(cfg.AreaOffset, uint64(bs)),
	}
	regions := ceilDiv(cfg.ArraySectors, rs)
	if regions > MaxRegions {
		g.Regions = int(min(regions, math.MaxInt32))
		return g, 0, false
	}
	g.Regions = int(regions)
	g.DataBlocks = (g.Regions + g.PerBlock - 1) / g.PerBlock
	need = g.UsedBytes()
	// The copy must lie in the area, and the area's end within the
	// 64-bit address space (so block offsets cannot wrap).
	return g, need, g.Start >= cfg.AreaOffset && need <= cfg.AreaBytes && need <= math.MaxUint64-cfg.AreaOffset
}

// DefaultRegionSectors is the default region size for an array of
// arraySectors: the smallest power of two >= 4 MiB that makes at most
// DefaultMaxRegions (65,536) regions, which keeps the bitmap at 68 KiB of
// states (17 data blocks of 4 KiB) at most:
//
//	array size   region   regions (at most)
//	≤ 256 GiB    4 MiB    65,536
//	≤ 512 GiB    8 MiB    65,536
//	≤ 1 TiB      16 MiB   65,536
//	≤ 4 TiB      64 MiB   65,536   (md's usual internal bitmap chunk)
//	≤ 16 TiB     256 MiB  65,536
//	≤ 64 TiB     1 GiB    65,536
//
// Why: a region is the unit of resync after a crash, so smaller is better
// there, but every first write to a clean region waits for a bitmap write,
// and a random workload over the array turns regions dirty one by one, so
// fewer regions means fewer waits (and with the lazy clear they stay dirty
// while the array is busy). 4 MiB resyncs in a few milliseconds on NVMe and
// is 8 times the largest I/O, so a write rarely spans two regions; above
// 256 GiB the region grows to keep the bitmap small: a crash leaves at
// most the regions written in the last clear delay dirty, a small part of
// the array.
func DefaultRegionSectors(arraySectors uint64) uint64 {
	rs := uint64(DefaultMinRegionSectors)
	for ceilDiv(arraySectors, rs) > DefaultMaxRegions && rs < 1<<62/SectorSize {
		rs <<= 1
	}
	return rs
}

// AreaBytesFor returns the size of reserved area cfg's bitmap needs
// (cfg.AreaBytes is ignored), rounded up to 4 KiB: what to ask the
// superblock for at create (engine.ArraySpec.BitmapBytes). It grows with
// ArraySectors, so sizing with an upper bound of the array's size is safe.
func AreaBytesFor(cfg Config) (uint64, error) {
	cfg.AreaBytes = math.MaxUint64
	g, err := NewGeometry(cfg)
	if err != nil {
		return 0, err
	}
	return roundUp(g.UsedBytes(), 4096), nil
}

// BlockSizeFor returns the bitmap block size for members with the given
// logical and physical block sizes and optimal I/O size (the largest over
// the members): the largest of them (io_opt only when it is a power of two
// up to MaxBlockSize), and at least 4096, so bitmap writes never make a
// drive read-modify-write and a member later replaced by a 4Kn device can
// still be written.
func BlockSizeFor(logical, physical, ioOpt uint32) int {
	bs := uint32(4096)
	bs = max(bs, logical, physical)
	if ioOpt != 0 && ioOpt&(ioOpt-1) == 0 && ioOpt <= MaxBlockSize {
		bs = max(bs, ioOpt)
	}
	if bs&(bs-1) != 0 {
		bs = 1 << bits.Len32(bs)
	}
	return int(bs)
}

// Header is the decoded header block.
type Header struct {
	// Version is the format version it was written in (Version or
	// VersionV1).
	Version    int
	BlockSize  int
	DataBlocks int
	ArrayUUID  [16]byte
	Events     uint64
	// EventsCleared is the generation in which a region was last cleared
	// (1..Events); for a version 1 header, which does not say, Events.
	EventsCleared uint64
	RegionSectors uint64
	Regions       int
	ArraySectors  uint64
}

// EncodeHeader writes the header block for g, events and eventsCleared
// (1..events) into dst (len(dst) >= g.BlockSize), in format Version.
func EncodeHeader(dst []byte, g *Geometry, events, eventsCleared uint64) {
	b := dst[:g.BlockSize]
	clear(b)
	le := binary.LittleEndian
	copy(b[hMagic:], Magic)
	le.PutUint32(b[hVersion:], Version)
	le.PutUint32(b[hBlockSize:], uint32(g.BlockSize))
	le.PutUint32(b[hHeaderBlocks:], HeaderBlocks)
	le.PutUint32(b[hDataBlocks:], uint32(g.DataBlocks))
	copy(b[hUUID:hUUID+16], g.ArrayUUID[:])
	le.PutUint64(b[hEvents:], events)
	le.PutUint64(b[hRegionSectors:], g.RegionSectors)
	le.PutUint64(b[hRegions:], uint64(g.Regions))
	le.PutUint64(b[hArraySectors:], g.ArraySectors)
	le.PutUint32(b[hPerBlock:], uint32(g.PerBlock))
	le.PutUint64(b[hEventsCleared:], eventsCleared)
	le.PutUint32(b[hChecksum:], headerChecksum(b))
}

func headerChecksum(b []byte) uint32 {
	var zero [4]byte
	c := crc32.Update(0, castagnoli, b[:hChecksum])
	c = crc32.Update(c, castagnoli, zero[:])
	return crc32.Update(c, castagnoli, b[hChecksum+4:])
}

// DecodeHeader decodes and checks a header block at the start of b, which
// must hold at least the block (its size is in the header). Errors wrap
// ErrNoBitmap (no magic) or ErrCorrupt.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < MinBlockSize {
		return Header{}, fmt.Errorf("%w: header buffer of %d bytes, need at least %d", ErrCorrupt, len(b), MinBlockSize)
	}
	if string(b[hMagic:hMagic+8]) != Magic {
		return Header{}, ErrNoBitmap
	}
	le := binary.LittleEndian
	corrupt := func(format string, args ...any) (Header, error) {
		return Header{}, fmt.Errorf("%w: header: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	v := le.Uint32(b[hVersion:])
	end := hEnd
	switch v {
	case Version:
	case VersionV1:
		end = hEndV1
	default:
		return corrupt("unknown format version %d (this build reads %d and %d)", v, VersionV1, Version)
	}
	bs := int(le.Uint32(b[hBlockSize:]))
	if bs < MinBlockSize || bs > MaxBlockSize || bs&(bs-1) != 0 {
		return corrupt("block size %d is not a power of two from %d to %d", bs, MinBlockSize, MaxBlockSize)
	}
	if len(b) < bs {
		return corrupt("block size %d but only %d bytes", bs, len(b))
	}
	b = b[:bs]
	if got, want := le.Uint32(b[hChecksum:]), headerChecksum(b); got != want {
		return corrupt("checksum mismatch (stored %#08x, computed %#08x)", got, want)
	}
	if f := le.Uint32(b[hFlags:]); f != 0 {
		return corrupt("unknown flags %#x", f)
	}
	if hb := le.Uint32(b[hHeaderBlocks:]); hb != HeaderBlocks {
		return corrupt("%d header blocks, not %d", hb, HeaderBlocks)
	}
	for i, c := range b[end:] {
		if c != 0 {
			return corrupt("reserved byte %d is not zero", end+i)
		}
	}
	h := Header{
		Version:       int(v),
		BlockSize:     bs,
		DataBlocks:    int(le.Uint32(b[hDataBlocks:])),
		Events:        le.Uint64(b[hEvents:]),
		RegionSectors: le.Uint64(b[hRegionSectors:]),
		ArraySectors:  le.Uint64(b[hArraySectors:]),
	}
	copy(h.ArrayUUID[:], b[hUUID:])
	regions := le.Uint64(b[hRegions:])
	switch rs := h.RegionSectors; {
	case h.ArrayUUID == [16]byte{}:
		return corrupt("array UUID is zero")
	case h.Events == 0:
		return corrupt("events is 0")
	case h.Events == math.MaxUint64:
		return corrupt("events %d is past the maximum of %d (the counter would wrap)", h.Events, uint64(math.MaxUint64-1))
	case rs < MinRegionSectors || rs&(rs-1) != 0 || rs > 1<<62/SectorSize:
		return corrupt("region size of %d sectors is not a power of two >= %d", rs, MinRegionSectors)
	case h.ArraySectors == 0 || regions != ceilDiv(h.ArraySectors, rs) || regions > MaxRegions:
		return corrupt("%d regions of %d sectors do not cover %d sectors", regions, rs, h.ArraySectors)
	case int(le.Uint32(b[hPerBlock:])) != bs-TrailerSize:
		return corrupt("%d states per block, not %d", le.Uint32(b[hPerBlock:]), bs-TrailerSize)
	}
	if v == VersionV1 {
		// Not recorded: regions may have been cleared as late as this
		// header's generation.
		h.EventsCleared = h.Events
	} else if h.EventsCleared = le.Uint64(b[hEventsCleared:]); h.EventsCleared == 0 || h.EventsCleared > h.Events {
		return corrupt("events cleared %d is not in 1..events (%d)", h.EventsCleared, h.Events)
	}
	h.Regions = int(regions)
	if want := (h.Regions + bs - TrailerSize - 1) / (bs - TrailerSize); h.DataBlocks != want {
		return corrupt("%d data blocks, %d regions need %d", h.DataBlocks, h.Regions, want)
	}
	return h, nil
}

// Geometry returns the header's layout in an area at areaOffset of
// areaBytes, or an error (wrapping ErrMismatch) if it does not fit there.
func (h *Header) Geometry(areaOffset, areaBytes uint64) (Geometry, error) {
	g, need, ok := fit(Config{
		ArrayUUID:     h.ArrayUUID,
		ArraySectors:  h.ArraySectors,
		RegionSectors: h.RegionSectors,
		BlockSize:     h.BlockSize,
		AreaOffset:    areaOffset,
		AreaBytes:     areaBytes,
	}, h.RegionSectors)
	if !ok {
		return Geometry{}, fmt.Errorf("%w: the bitmap needs %d bytes but the area is %d bytes", ErrMismatch, need, areaBytes)
	}
	return g, nil
}

// EncodeBlock writes data block i (>= 1) of g into dst (len(dst) >=
// g.BlockSize) with the states of its regions, taken from image (one
// State byte per region of the whole bitmap), and the batch sequence seq.
func EncodeBlock(dst []byte, g *Geometry, i int, seq uint64, image []byte) {
	b := dst[:g.BlockSize]
	first, end := g.BlockRegions(i)
	n := copy(b, image[first:end])
	clear(b[n:g.PerBlock])
	le := binary.LittleEndian
	le.PutUint64(b[g.PerBlock:], seq)
	le.PutUint32(b[g.PerBlock+8:], uint32(i))
	le.PutUint32(b[g.PerBlock+12:], blockChecksum(&g.ArrayUUID, b))
}

func blockChecksum(uuid *[16]byte, b []byte) uint32 {
	c := crc32.Update(0, castagnoli, uuid[:])
	return crc32.Update(c, castagnoli, b[:len(b)-4])
}

// DecodeBlock checks data block i (>= 1) of g at the start of b and
// returns its region states (a slice of b, one byte per region of the
// block) and sequence number. Errors wrap ErrCorrupt.
func DecodeBlock(b []byte, g *Geometry, i int) (states []byte, seq uint64, err error) {
	if len(b) < g.BlockSize {
		return nil, 0, fmt.Errorf("%w: block %d: %d bytes, need %d", ErrCorrupt, i, len(b), g.BlockSize)
	}
	b = b[:g.BlockSize]
	le := binary.LittleEndian
	if got, want := le.Uint32(b[g.PerBlock+12:]), blockChecksum(&g.ArrayUUID, b); got != want {
		return nil, 0, fmt.Errorf("%w: block %d: checksum mismatch (stored %#08x, computed %#08x): torn write or corruption", ErrCorrupt, i, got, want)
	}
	if idx := le.Uint32(b[g.PerBlock+8:]); idx != uint32(i) {
		return nil, 0, fmt.Errorf("%w: block %d: holds block index %d (misplaced write)", ErrCorrupt, i, idx)
	}
	first, end := g.BlockRegions(i)
	states = b[:end-first]
	for j, s := range states {
		if s > byte(Dirty) {
			return nil, 0, fmt.Errorf("%w: block %d: region %d has unknown state %d", ErrCorrupt, i, first+j, s)
		}
	}
	for j, s := range b[end-first : g.PerBlock] {
		if s != 0 {
			return nil, 0, fmt.Errorf("%w: block %d: byte %d past the last region is not zero", ErrCorrupt, i, end-first+j)
		}
	}
	return states, le.Uint64(b[g.PerBlock:]), nil
}

// findHeader looks for the header in area (a copy of the reserved area
// from areaOffset): at the first multiple of each possible block size,
// holding that block size. Of several valid headers (a bitmap recreated
// with another block size), it takes the one of uuid (if not zero) with the
// highest events.
func findHeader(area []byte, areaOffset uint64, uuid [16]byte) (h Header, err error) {
	var found bool
	err = ErrNoBitmap
	for bs := MinBlockSize; bs <= MaxBlockSize; bs <<= 1 {
		start := roundUp(areaOffset, uint64(bs))
		if start < areaOffset || start-areaOffset > uint64(len(area)) || uint64(bs) > uint64(len(area))-(start-areaOffset) {
			break // past the area (or past the end of the address space)
		}
		off := start - areaOffset
		b := area[off:]
		if string(b[:len(Magic)]) != Magic || binary.LittleEndian.Uint32(b[hBlockSize:]) != uint32(bs) {
			continue
		}
		c, cerr := DecodeHeader(b[:bs])
		switch {
		case cerr != nil:
			if !found {
				err = cerr
			}
		case uuid != [16]byte{} && c.ArrayUUID != uuid:
			if !found {
				err = fmt.Errorf("%w: bitmap of array %x, not %x", ErrMismatch, c.ArrayUUID, uuid)
			}
		case !found || c.Events > h.Events:
			h, found, err = c, true, nil
		}
	}
	if err == nil && !found {
		err = ErrNoBitmap
	}
	return h, err
}

// Summary is what Examine finds in one member's copy.
type Summary struct {
	Header   Header
	Geometry Geometry
	// Region counts by state, over the blocks that decoded.
	Dirty, Clean, NeverWritten int
	// BadBlocks are the data blocks that failed to decode (torn or
	// corrupt), with the reasons.
	BadBlocks []BlockError
	// Seq is the highest batch sequence number among the blocks.
	Seq uint64
}

// BlockError is a block that failed to decode.
type BlockError struct {
	Block int
	Err   error
}

// Examine decodes one member's copy of the bitmap (like mdadm -X): area is
// the reserved area's bytes from areaOffset. It fails only if no header is
// found; undecodable data blocks are listed in the summary.
func Examine(area []byte, areaOffset uint64) (*Summary, error) {
	h, err := findHeader(area, areaOffset, [16]byte{})
	if err != nil {
		return nil, err
	}
	g, err := h.Geometry(areaOffset, uint64(len(area)))
	if err != nil {
		return nil, err
	}
	s := &Summary{Header: h, Geometry: g}
	for i := HeaderBlocks; i < g.Blocks(); i++ {
		off := g.BlockOffset(i) - areaOffset
		states, seq, err := DecodeBlock(area[off:], &g, i)
		if err != nil {
			s.BadBlocks = append(s.BadBlocks, BlockError{i, err})
			continue
		}
		s.Seq = max(s.Seq, seq)
		for _, st := range states {
			switch State(st) {
			case Dirty:
				s.Dirty++
			case Clean:
				s.Clean++
			default:
				s.NeverWritten++
			}
		}
	}
	return s, nil
}

func ceilDiv(a, b uint64) uint64 { return a/b + min(a%b, 1) }

// roundUp rounds n up to a multiple of the power of two a, saturating.
func roundUp(n, a uint64) uint64 {
	if n > math.MaxUint64-(a-1) {
		return math.MaxUint64 &^ (a - 1)
	}
	return (n + a - 1) &^ (a - 1)
}

// sizeString formats a byte count: "64 MiB", "512 B", "1.5 GiB".
func sizeString(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for i < len(units)-1 && n >= 1<<(10*(i+1)) {
		i++
	}
	if n%(1<<(10*i)) == 0 {
		return fmt.Sprintf("%d %s", n>>(10*i), units[i])
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(uint64(1)<<(10*i)), units[i])
}
