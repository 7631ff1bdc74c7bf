package engine

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
)

// The write-hole log of the parity levels (format version 1).
//
// A crash during a write to a stripe can leave its data and parity
// disagreeing (some sectors written, others not). If a member is then
// lost, or was lost before, its chunk is rebuilt from that parity, and
// data nobody was writing comes back wrong: the write hole. So before a
// write's data and parity writes are issued, an entry is written durably
// to the log area of each surviving parity member of the stripe. For the
// rows [RowLo, RowHi) and a set X of data slots (syndrome order,
// StripeMap.Slot), Logged, its payload is the partial parity of the X
// chunks' intended values:
//
//	L_P = XOR over the slots s in X of D_s
//	L_Q = Σ over the slots s in X of g^s · D_s   (raid6)
//
// X is every data slot the recovery cannot read back as the write left
// it: the slots the write does not write (their old data, md's PPL
// "partial parity"), and, degraded, the written slots whose members are
// lost (their new data, which exists only as parity). X is empty for a
// full-stripe write of a healthy stripe (the entry then says only that
// the stripe's parity is to be computed from its data, and has no
// payload: L is zero). Rows outside
// what the write writes may be logged too: there
// nothing changes, and L over X of the old values gives the old parity.
//
// After a crash, each stripe's newest valid entry newer than the log's
// checkpoint is replayed: read the stripe's chunks outside X for the
// rows, as they are on disk (old, new or any per-sector mix of the two:
// they were being written), and write P = L_P ^ their XOR and Q = L_Q ^
// Σ g^s · D_s (Parity.RecoverParity) to the parity members. The parity
// then equals the syndrome of the chunks on disk with the X chunks at
// their intended values, so rebuilding any chunk in X (lost before, or
// lost after the crash) gives its intended value.
//
// An entry is a 4096-byte header followed by its payload: the rows of L_P
// (RowHi-RowLo sectors), then for raid6 those of L_Q; ParityLogEntrySize
// is its size. All integers are little-endian; every reserved byte is
// zero. The header:
//
//	offset  size  field
//	     0     8  magic "ublkplog"
//	     8     4  format version (1)
//	    12     4  header checksum: CRC-32C (Castagnoli) of the 4096 bytes with this field zero
//	    16     4  payload checksum: CRC-32C of the payload
//	    20     4  flags: none defined, zero
//	    24    16  array UUID
//	    40     8  sequence number: >= 1, increasing per array with each entry written
//	    48     8  stripe
//	    56     8  RowLo: first row, in sectors within the chunk
//	    64     8  RowHi: end row (exclusive), RowLo < RowHi <= chunk size
//
// (Rows are sectors: a write of 512-byte sectors logs just its rows, and
// the entry takes whole 4 KiB blocks on the member, its last one padded.
// An entry with Logged zero has no payload: its payload checksum is that
// of no bytes.)
//
//	 72     8  Logged: bit s set when data slot s (syndrome order) is in X; any of the data slots
//	 80     8  Written: bit s set when the write writes data slot s; at least one bit
//	 88     4  parity count: 1 (raid5) or 2 (raid6)
//	 92     4  member count of the array
//	 96     4  layout (ParityLayout)
//	100     4  chunk size in sectors
//	104  3992  reserved
//
// The member count, layout and chunk size are those of the geometry the
// entry was written under (they fix the stripe map, and so what the slots
// and rows mean); an entry of another geometry is refused. Both masks
// lie within the stripe's data slots.
const (
	// ParityLogMagic is the first 8 bytes of a write-hole log entry.
	ParityLogMagic = "ublkplog"
	// ParityLogVersion is the entry format this package reads and writes.
	ParityLogVersion = 1
	// ParityLogHeaderSize is the size of an entry's header in bytes.
	ParityLogHeaderSize = 4096
	// MaxParityLogSeq is the largest entry number an entry read from disk
	// may carry, and MaxParityLogCheckpoint the largest checkpoint a log
	// area header may: below 2^63, far enough below 2^64 that the
	// numbers after either never wrap (2^63 writes at 10 million a
	// second take 29,000 years). A recovery whose next number is past
	// ParityLogRenumberAt (only a damaged or crafted header or entry
	// gets there) empties the log areas and numbers from 1 again, when
	// every role is present to be emptied; so the run after it writes
	// numbers and checkpoints the next recovery reads. (Encode takes
	// any below 2^64-1.)
	MaxParityLogSeq        = 1<<63 - 1
	MaxParityLogCheckpoint = MaxParityLogSeq
	ParityLogRenumberAt    = 1 << 62
)

// Header field offsets (bytes within the entry).
const (
	plOffMagic      = 0
	plOffVersion    = 8
	plOffChecksum   = 12
	plOffPayloadSum = 16
	plOffFlags      = 20
	plOffUUID       = 24
	plOffSeq        = 40
	plOffStripe     = 48
	plOffRowLo      = 56
	plOffRowHi      = 64
	plOffLogged     = 72
	plOffWritten    = 80
	plOffParity     = 88
	plOffMembers    = 92
	plOffLayout     = 96
	plOffChunk      = 100
	plOffReserved   = 104
)

// Errors. DecodeParityLogEntry's errors for a bad block wrap
// ErrParityLogCorrupt (and ErrNoParityLogEntry when the magic is missing,
// ErrBadChecksum or ErrUnknownVersion when that is the reason); use
// errors.Is.
var (
	// ErrParityLogCorrupt: the block is not a valid entry of this array
	// and geometry: torn, corrupt, stale from another array or shape, or
	// no entry at all. Recovery skips it.
	ErrParityLogCorrupt = errors.New("corrupt write-hole log entry")
	// ErrNoParityLogEntry is the reason of a corrupt entry without the
	// magic: a zeroed or never-written log slot (or a torn first sector).
	ErrNoParityLogEntry = errors.New("no write-hole log entry")
	// ErrInvalidParityLogEntry: Encode refused a value.
	ErrInvalidParityLogEntry = errors.New("invalid write-hole log entry")
)

// ParityLogEntry is one write-hole log entry (see the format above).
type ParityLogEntry struct {
	Array  [16]byte // array UUID, not zero
	Seq    uint64   // sequence number, >= 1
	Stripe uint64
	// RowLo, RowHi: the rows logged, [RowLo, RowHi) in sectors within
	// the chunk.
	RowLo, RowHi uint64
	// Logged and Written are masks of data slots (syndrome order): X,
	// the slots whose intended values the payload's parity holds, and
	// the slots the write writes.
	Logged, Written uint64
	// Parity is the number of parity chunks: 1 (raid5) or 2 (raid6).
	Parity int
	// Unlogged: bit k set when L_P (k 0) or L_Q (k 1) was not computed
	// (zeroes): its parity member was out when the write was made, an
	// RMW neither read nor wrote it. A recovery leaves that member as it
	// is (it may be back and rebuilt past the stripe since). The header's
	// flags field; 0 in entries written before it was.
	Unlogged uint8
	// P and Q are the payload, L_P and L_Q (Q empty for raid5), each
	// (RowHi-RowLo)·512 bytes. Decoded, they alias the decoded block.
	P, Q []byte
}

// ParityLogEntrySize is the size in bytes of an entry of rows sectors per
// chunk with parity parity chunks and a payload (Logged not zero): the
// header and the payload. rows is at most a chunk (MaxChunkSectors), so
// it cannot overflow.
func ParityLogEntrySize(rows uint64, parity int) int {
	return ParityLogHeaderSize + int(rows)*sbSector*parity
}

// payloadRows is the number of rows the entry's payload holds: none when
// it logs no slot.
func (e *ParityLogEntry) payloadRows() uint64 {
	if e.Logged == 0 {
		return 0
	}
	return e.RowHi - e.RowLo
}

// Size is the entry's size in bytes: its header and its payload (none
// when Logged is zero).
func (e *ParityLogEntry) Size() int { return ParityLogEntrySize(e.payloadRows(), e.Parity) }

// ParityLogPayload returns the places of L_P and L_Q (nil for raid5) in
// an entry's block b, of at least ParityLogEntrySize(rows, parity) bytes:
// the caller may compute them there (Parity.LogParity) and Encode from
// them, which copies nothing.
func ParityLogPayload(b []byte, rows uint64, parity int) (lp, lq []byte) {
	n := int(rows) * sbSector
	lp = b[ParityLogHeaderSize : ParityLogHeaderSize+n : ParityLogHeaderSize+n]
	if parity == 2 {
		lq = b[ParityLogHeaderSize+n : ParityLogHeaderSize+2*n : ParityLogHeaderSize+2*n]
	}
	return lp, lq
}

// SlotMask converts a mask of members into the mask of the data slots
// (syndrome order) of those of them that hold data chunks in the stripe;
// parity members are ignored.
func (m *StripeMap) SlotMask(members uint64) uint64 {
	var slots uint64
	for mm := members; mm != 0; mm &= mm - 1 {
		if s := m.Slot[bits.TrailingZeros64(mm)]; s >= 0 {
			slots |= 1 << uint(s)
		}
	}
	return slots
}

// check validates the entry's fields against geometry g (which must be
// valid) and the array's UUID; errors are bare reasons. payload says
// whether to check the lengths of P and Q (Encode; Decode sets them).
func (e *ParityLogEntry) check(g *ParityGeometry, uuid [16]byte, payload bool) error {
	if e.Array == ([16]byte{}) {
		return errors.New("array UUID is zero")
	}
	if e.Array != uuid {
		return fmt.Errorf("array UUID %s is not this array's (%s)", UUIDString(e.Array), UUIDString(uuid))
	}
	if e.Seq == 0 || e.Seq == math.MaxUint64 {
		// (The checkpoint past an entry is its number + 1: the largest
		// number would wrap it to 0 and stay live at every assembly.)
		return fmt.Errorf("sequence number %d is 0 or the largest", e.Seq)
	}
	if pc := g.ParityMembers(); e.Parity != pc {
		return fmt.Errorf("parity count %d, not %s's %d", e.Parity, g.Level, pc)
	}
	if e.Unlogged>>uint(e.Parity) != 0 {
		return fmt.Errorf("unlogged parity bits %#x beyond the %d parity chunks", e.Unlogged, e.Parity)
	}
	if n := g.Stripes(); e.Stripe >= n {
		return fmt.Errorf("stripe %d is past the array's %d stripes", e.Stripe, n)
	}
	if e.RowLo >= e.RowHi || e.RowHi > g.ChunkSectors {
		return fmt.Errorf("rows [%d, %d) are empty or not within a chunk of %d sectors", e.RowLo, e.RowHi, g.ChunkSectors)
	}
	slots := uint64(1)<<uint(g.DataMembers()) - 1
	if e.Logged&^slots != 0 {
		return fmt.Errorf("logged slots %#x are not within the %d data slots", e.Logged, g.DataMembers())
	}
	if e.Written == 0 || e.Written&^slots != 0 {
		return fmt.Errorf("written slots %#x are none, or not within the %d data slots", e.Written, g.DataMembers())
	}
	if payload {
		n := int(e.payloadRows()) * sbSector
		if len(e.P) != n || e.Parity == 2 && len(e.Q) != n || e.Parity == 1 && len(e.Q) != 0 {
			return fmt.Errorf("payload of %d and %d bytes for %d rows with %d parity chunks", len(e.P), len(e.Q), e.RowHi-e.RowLo, e.Parity)
		}
	}
	return nil
}

// Encode validates the entry against the array's geometry g and writes
// it to the start of b: the header, then P and Q (copied, unless they are
// already in place: ParityLogPayload). It returns the entry's size,
// ParityLogEntrySize; b must hold it. It does not allocate.
func (e *ParityLogEntry) Encode(b []byte, g ParityGeometry) (int, error) {
	if err := g.Validate(); err != nil {
		return 0, fmt.Errorf("%w: geometry: %w", ErrInvalidParityLogEntry, err)
	}
	if err := e.check(&g, e.Array, true); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidParityLogEntry, err)
	}
	size := e.Size()
	if len(b) < size {
		return 0, fmt.Errorf("write-hole log entry of %d bytes does not fit a buffer of %d", size, len(b))
	}
	lp, lq := ParityLogPayload(b, e.payloadRows(), e.Parity)
	copy(lp, e.P)
	copy(lq, e.Q)
	h := b[:ParityLogHeaderSize]
	clear(h)
	le := binary.LittleEndian
	copy(h[plOffMagic:], ParityLogMagic)
	le.PutUint32(h[plOffVersion:], ParityLogVersion)
	le.PutUint32(h[plOffPayloadSum:], crc32.Checksum(b[ParityLogHeaderSize:size], castagnoli))
	le.PutUint32(h[plOffFlags:], uint32(e.Unlogged))
	copy(h[plOffUUID:plOffUUID+16], e.Array[:])
	le.PutUint64(h[plOffSeq:], e.Seq)
	le.PutUint64(h[plOffStripe:], e.Stripe)
	le.PutUint64(h[plOffRowLo:], e.RowLo)
	le.PutUint64(h[plOffRowHi:], e.RowHi)
	le.PutUint64(h[plOffLogged:], e.Logged)
	le.PutUint64(h[plOffWritten:], e.Written)
	le.PutUint32(h[plOffParity:], uint32(e.Parity))
	le.PutUint32(h[plOffMembers:], uint32(g.Members))
	le.PutUint32(h[plOffLayout:], uint32(g.Layout))
	le.PutUint32(h[plOffChunk:], uint32(g.ChunkSectors))
	le.PutUint32(h[plOffChecksum:], parityLogFieldsSum(h))
	return size, nil
}

// parityLogFieldsSum is parityLogHeaderSum of a header whose reserved
// bytes are zero (Encode's), without reading them: the CRC of the fields,
// then of the zero tail by the operator plZeroTail. The header's zero
// tail is most of its 4 KiB, and the sum is on every write's path.
func parityLogFieldsSum(h []byte) uint32 {
	return plZeroTail.apply(parityLogFieldsCRC(h))
}

// parityLogFieldsCRC is the CRC-32C of the header's fields (before the
// reserved bytes), the checksum field taken as zero.
func parityLogFieldsCRC(h []byte) uint32 {
	c := crc32.Update(0, castagnoli, h[:plOffChecksum])
	c = crc32.Update(c, castagnoli, plZeroSum[:])
	return crc32.Update(c, castagnoli, h[plOffChecksum+4:plOffReserved])
}

// crcZeros is the linear map a run of zero bytes makes of a CRC-32C's
// register: col[i] is where the register's bit i goes.
type crcZeros struct{ col [32]uint32 }

// plZeroTail appends the header's reserved bytes (all zero) to a CRC.
var plZeroTail = newCRCZeros(ParityLogHeaderSize - plOffReserved)

// newCRCZeros is the map of n zero bytes, taken from crc32 itself: over
// zero bytes the register (the CRC inverted) changes linearly, so the
// image of each bit determines the image of every register.
func newCRCZeros(n int) *crcZeros {
	z := make([]byte, n)
	var m crcZeros
	for i := range m.col {
		m.col[i] = ^crc32.Update(^(uint32(1) << i), castagnoli, z)
	}
	return &m
}

// apply is crc32.Update(c, castagnoli, n zero bytes).
func (m *crcZeros) apply(c uint32) uint32 {
	reg, out := ^c, uint32(0)
	for i := 0; reg != 0; i++ {
		if reg&1 != 0 {
			out ^= m.col[i]
		}
		reg >>= 1
	}
	return ^out
}

// plZeroSum stands for the checksum field in its own checksum (a package
// variable: a local one would escape through crc32.Update and allocate).
var plZeroSum [4]byte

// parityLogHeaderSum is the CRC-32C of the header h with the checksum
// field taken as zero.
func parityLogHeaderSum(h []byte) uint32 {
	return crc32.Update(parityLogFieldsCRC(h), castagnoli, h[plOffReserved:ParityLogHeaderSize])
}

// DecodeParityLogEntry decodes and validates the entry at the start of b
// (which may run past the entry's end: a log slot's whole block) for the
// array of geometry g and UUID uuid. Everything is checked: magic,
// version, both checksums, zero flags and reserved bytes, the array, the
// geometry the entry was written under, and every field's bounds in it
// (as Encode). Any failure (a torn, corrupt or truncated entry, one of
// another array or shape, an empty slot) is an error wrapping
// ErrParityLogCorrupt; an invalid g is an error that does not. The
// entry's P and Q alias b. It does not allocate but on error.
func DecodeParityLogEntry(b []byte, g ParityGeometry, uuid [16]byte) (ParityLogEntry, error) {
	var e ParityLogEntry
	if err := g.Validate(); err != nil {
		return e, fmt.Errorf("write-hole log: geometry: %w", err)
	}
	corrupt := func(err error) error { return fmt.Errorf("%w: %w", ErrParityLogCorrupt, err) }
	if len(b) < ParityLogHeaderSize {
		return e, corrupt(fmt.Errorf("%d bytes, shorter than the %d-byte header", len(b), ParityLogHeaderSize))
	}
	h := b[:ParityLogHeaderSize]
	if string(h[plOffMagic:plOffMagic+8]) != ParityLogMagic {
		return e, corrupt(ErrNoParityLogEntry)
	}
	le := binary.LittleEndian
	if v := le.Uint32(h[plOffVersion:]); v != ParityLogVersion {
		return e, corrupt(fmt.Errorf("%w %d (this build reads version %d)", ErrUnknownVersion, v, ParityLogVersion))
	}
	if got, want := le.Uint32(h[plOffChecksum:]), parityLogHeaderSum(h); got != want {
		return e, corrupt(fmt.Errorf("header %w (stored %#08x, computed %#08x)", ErrBadChecksum, got, want))
	}
	flags := le.Uint32(h[plOffFlags:])
	if flags&^(1<<2-1) != 0 {
		return e, corrupt(fmt.Errorf("unknown flags %#x", flags))
	}
	if o := firstNonZero(h[plOffReserved:]); o >= 0 {
		return e, corrupt(fmt.Errorf("reserved byte %d is not zero", plOffReserved+o))
	}
	members, layout, chunk := le.Uint32(h[plOffMembers:]), le.Uint32(h[plOffLayout:]), le.Uint32(h[plOffChunk:])
	if uint64(members) != uint64(g.Members) || layout != uint32(g.Layout) || uint64(chunk) != g.ChunkSectors {
		return e, corrupt(fmt.Errorf("written for %d members, layout %d, %d-sector chunks; the array has %d, %d, %d",
			members, layout, chunk, g.Members, int(g.Layout), g.ChunkSectors))
	}
	pc := le.Uint32(h[plOffParity:])
	if pc != 1 && pc != 2 {
		return e, corrupt(fmt.Errorf("parity count %d is not 1 or 2", pc))
	}
	copy(e.Array[:], h[plOffUUID:plOffUUID+16])
	e.Seq = le.Uint64(h[plOffSeq:])
	e.Stripe = le.Uint64(h[plOffStripe:])
	e.RowLo = le.Uint64(h[plOffRowLo:])
	e.RowHi = le.Uint64(h[plOffRowHi:])
	e.Logged = le.Uint64(h[plOffLogged:])
	e.Written = le.Uint64(h[plOffWritten:])
	e.Parity = int(pc)
	e.Unlogged = uint8(flags)
	if err := e.check(&g, uuid, false); err != nil {
		return ParityLogEntry{}, corrupt(err)
	}
	if e.Seq > MaxParityLogSeq {
		return ParityLogEntry{}, corrupt(fmt.Errorf("sequence number %d is past %d", e.Seq, uint64(MaxParityLogSeq)))
	}
	// The rows are within a valid chunk now: the size cannot overflow.
	size := e.Size()
	if len(b) < size {
		return ParityLogEntry{}, corrupt(fmt.Errorf("%d bytes, shorter than the entry's %d", len(b), size))
	}
	if got, want := le.Uint32(h[plOffPayloadSum:]), crc32.Checksum(b[ParityLogHeaderSize:size], castagnoli); got != want {
		return ParityLogEntry{}, corrupt(fmt.Errorf("payload %w (stored %#08x, computed %#08x)", ErrBadChecksum, got, want))
	}
	e.P, e.Q = ParityLogPayload(b, e.payloadRows(), e.Parity)
	return e, nil
}

var errParityLogged = errors.New("parity: logged slots out of range")

// checkLogged checks a mask of data slots: within the data slots.
func (p *Parity) checkLogged(logged uint64) error {
	if logged>>uint(p.data) != 0 {
		return errParityLogged
	}
	return nil
}

// LogParity computes the payload of a write-hole log entry: log (L_P,
// then L_Q for raid6) is the parity of the data chunks in the slots X
// (lost) alone, as if every other chunk were zero. data is every data
// chunk's rows in syndrome order, at its intended value (what the write
// leaves there: the new data of a chunk it writes, the old, reconstructed
// if its member is lost, of one it does not); only X's entries are read
// (the others may be nil). All chunks the same size. It does not
// allocate. (An RMW, which does not read the chunks it does not write,
// has the same payload as the old parity plus the parity of the written
// chunks' old data.)
func (p *Parity) LogParity(data [][]byte, lost uint64, log [][]byte) error {
	if err := p.checkLogged(lost); err != nil {
		return err
	}
	if len(data) != p.data || len(log) != p.Count() {
		return errParityShape
	}
	n := len(log[0])
	for _, b := range log {
		if len(b) != n {
			return errParityShape
		}
	}
	for mm := lost; mm != 0; mm &= mm - 1 {
		if len(data[bits.TrailingZeros64(mm)]) != n {
			return errParityShape
		}
	}
	for _, b := range log {
		clear(b)
	}
	for mm := lost; mm != 0; mm &= mm - 1 {
		s := bits.TrailingZeros64(mm)
		if err := p.enc.EncodeIdx(data[s], s, log); err != nil {
			return err
		}
	}
	return nil
}

// RecoverParity computes the parity to write when replaying a write-hole
// log entry: parity (P, then Q for raid6) = log (the entry's L_P, L_Q)
// plus the parity of the data chunks not in the slots X (lost), as they
// are on disk now. data is in syndrome order; X's entries are not read
// (nil is fine). parity may be log itself (computed in place). With X
// empty, log may be empty (an entry without payload): L is zero.
// All chunks the same size. It does not allocate.
func (p *Parity) RecoverParity(log, data [][]byte, lost uint64, parity [][]byte) error {
	if err := p.checkLogged(lost); err != nil {
		return err
	}
	if len(data) != p.data || len(log) != p.Count() || len(parity) != p.Count() {
		return errParityShape
	}
	n := len(parity[0])
	empty := lost == 0 // (an entry without payload: L is zero)
	for k := range log {
		if len(log[k]) != 0 {
			empty = false
		}
	}
	for k := range log {
		if len(parity[k]) != n || !empty && len(log[k]) != n {
			return errParityShape
		}
	}
	for s, b := range data {
		if lost&(1<<uint(s)) == 0 && len(b) != n {
			return errParityShape
		}
	}
	for k := range parity {
		if empty {
			clear(parity[k])
		} else {
			copy(parity[k], log[k])
		}
	}
	for s, b := range data {
		if lost&(1<<uint(s)) != 0 {
			continue
		}
		if err := p.enc.EncodeIdx(b, s, parity); err != nil {
			return err
		}
	}
	return nil
}

// RecoverParityKeepingP is RecoverParity for a raid6 entry one of whose
// written chunks, data slot j, cannot be read (its member lost with the
// crash): that chunk is taken to hold what the stripe's P on disk (pDisk)
// implies, so P stays as it is, and Q is computed to agree with it, with
// the entry's X (log) and with the other written chunks as they are on
// disk. A chunk of X whose member is lost too is then rebuilt right from
// P and Q, and the lost written chunk reads what P says: its new data if
// the write's P reached the disk, else something else, as md's PPL allows
// for the written part of a stripe. data[j] is not read. pDisk is used as
// scratch. It does not allocate.
func (p *Parity) RecoverParityKeepingP(log, data [][]byte, lost uint64, j int, pDisk []byte, parity [][]byte) error {
	if p.Count() != 2 || j < 0 || j >= p.data || lost&(1<<uint(j)) != 0 || len(parity) != 2 || len(log) != 2 || len(data) != p.data {
		return errParityShape
	}
	if err := p.checkLogged(lost); err != nil {
		return err
	}
	n := len(pDisk)
	for k := range parity {
		switch {
		case len(parity[k]) != n:
			return errParityShape
		case len(log[k]) == n:
			copy(parity[k], log[k])
		case len(log[k]) == 0 && lost == 0: // (no payload: L is zero)
			clear(parity[k])
		default:
			return errParityShape
		}
	}
	for s, b := range data {
		if s == j || lost&(1<<uint(s)) != 0 {
			continue
		}
		if len(b) != n {
			return errParityShape
		}
		if err := p.enc.EncodeIdx(b, s, parity); err != nil {
			return err
		}
	}
	// The chunk P implies: P on disk less what the rest gives it.
	subtle.XORBytes(pDisk, pDisk, parity[0])
	return p.Update(pDisk, j, parity)
}
