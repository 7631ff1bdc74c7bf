package engine

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The on-disk superblock, format version 1.
//
// Every member carries one 4096-byte superblock at byte SuperblockOffset
// (4096, like md's v1.2 metadata), so the first 4 KiB of the member (where
// partition tables and boot sectors live) is never written; each update
// writes a shadow copy of it first, at the top of the reserved area
// (superblock_shadow.go). The layout of a member is
//
//	[0, 4096)                     untouched
//	[4096, 8192)                  superblock
//	[BitmapOffset, +BitmapBytes)  write-intent bitmap (inside the reserved area)
//	[top-4096, top)               the superblock's shadow copy, top = LogOffset or DataOffset
//	[LogOffset, +LogBytes)        raid5/6 write-hole log (inside the reserved area, at its end)
//	[8192, DataOffset)            reserved area: bitmap, headroom, shadow and log
//	[DataOffset, +DataSectors*512) data
//
// All integers are little-endian; offsets and sizes in the header are bytes
// except the fields named ...Sectors and the recovery offsets, which count
// 512-byte sectors. Reserved bytes are written as zero and a superblock with
// a non-zero reserved byte is rejected, so every accepted block is exactly
// what MarshalBinary writes for the parsed value.
//
//	offset  size  field
//	     0     8  magic "ublkraid"
//	     8     4  format version (1)
//	    12     4  checksum: CRC-32C (Castagnoli) of the 4096 bytes with this field zero
//	    16     4  flags: bit 0 clean (the array was stopped cleanly); other bits zero
//	    20     4  RAID level: 0, 1, 5, 6 or 10
//	    24     4  layout, md's encoding: 0 for RAID 0 and 1; RAID 10: near | far<<8 | offset<<16;
//	              RAID 5 and 6: md's algorithm, 0..3 (ParityLayout)
//	    28     4  chunk size in sectors (a power of two >= 8; RAID 1 may have 0)
//	    32     4  member count (raid disks), 1..64 (RAID 5: at least 3, RAID 6: at least 4)
//	    36     4  this member's role: 0..members-1, or 0xffffffff for a spare
//	    40    16  array UUID
//	    56    16  this member's UUID
//	    72    32  array name: UTF-8, NUL-padded, no control characters or '/'
//	   104     8  data offset in bytes (a multiple of 1 MiB, >= 1 MiB)
//	   112     8  data size in sectors, a multiple of 8: this member's usable size from the data offset
//	   120     8  bitmap offset in bytes from the start of the member (0 if no bitmap)
//	   128     8  bitmap size in bytes (a multiple of 4096, at most 128 MiB; 0 if no bitmap)
//	   136     8  events: generation counter, incremented on every state change (1..2^64-2)
//	   144     8  creation time, Unix nanoseconds (signed)
//	   152     8  update time, Unix nanoseconds (signed)
//	   160     8  resync offset in array sectors (not clean only: a resync of an array without a bitmap resumes here)
//	   168     8  write-hole log offset in bytes (raid5/6 only; 0 if no log)
//	   176     8  write-hole log size in bytes (a multiple of 4096, 64 KiB to 64 MiB; 0 if no log)
//	   184    72  reserved
//	   256  2048  role table: 64 entries of 32 bytes, indexed by role (see below)
//	  2304  1792  reserved
//
// A role table entry:
//
//	offset  size  field
//	     0     4  state: 0 unused, 1 active, 2 faulty, 3 rebuilding, 4 missing, 5 spare
//	     4     4  reserved
//	     8     8  recovery offset in sectors (rebuilding only: data below it is in sync)
//	    16    16  UUID of the member holding the role (or of the spare)
//
// Entries 0..members-1 describe the roles (active, faulty, rebuilding or
// missing); entries from members on are unused (all zero) or name the
// array's spares. A member UUID appears at most once in the table; a member
// holding a role is named by that role's entry (active, faulty or
// rebuilding); a spare is named by no role entry.
//
// A superblock is also bounded by the member it was read from
// (CheckMemberSize): the data area, and so the reserved area and the bitmap
// before it, must end within the member.
const (
	// SuperblockOffset is the byte offset of the superblock on a member.
	SuperblockOffset = 4096
	// SuperblockSize is the size of the superblock in bytes.
	SuperblockSize = 4096
	// SuperblockMagic is the first 8 bytes of a superblock.
	SuperblockMagic = "ublkraid"
	// FormatVersion is the superblock format this package reads and writes.
	FormatVersion = 1
	// RoleTableSize is the number of role table entries, and the largest
	// member count (the same as MaxMembers).
	RoleTableSize = 64
	// SpareRole is the role of a spare member (one that holds no data).
	SpareRole = math.MaxUint32
	// ArrayNameMax is the longest array name, in bytes.
	ArrayNameMax = 32
	// DataOffsetAlign is the alignment of DataOffset (1 MiB).
	DataOffsetAlign = 1 << 20
	// BitmapAlign is the alignment of BitmapOffset and BitmapBytes.
	BitmapAlign = 4096
	// MinLogBytes and MaxLogBytes bound a raid5/6 write-hole log area.
	MinLogBytes = 64 << 10
	MaxLogBytes = 64 << 20
	// MaxBitmapBytes is the largest bitmap area (128 MiB, the largest
	// headroom Reserve leaves): far more than any bitmap needs (a few MiB
	// at most), small enough to read at assembly.
	MaxBitmapBytes = 128 << 20
	// MaxEvents is the largest events counter. An array at MaxEvents
	// cannot record another state change (the counter would wrap), so it
	// is not assembled; 2^64-1 is never valid.
	MaxEvents = math.MaxUint64 - 1
)

const (
	sbSector   = 512 // the unit of the ...Sectors fields
	sbMinChunk = 8   // the smallest chunk, in sectors (4 KiB)
)

// Header field offsets (bytes within the superblock).
const (
	offMagic        = 0
	offVersion      = 8
	offChecksum     = 12
	offFlags        = 16
	offLevel        = 20
	offLayout       = 24
	offChunk        = 28
	offMembers      = 32
	offRole         = 36
	offArrayUUID    = 40
	offMemberUUID   = 56
	offName         = 72
	offDataOffset   = 104
	offDataSectors  = 112
	offBitmapOffset = 120
	offBitmapBytes  = 128
	offEvents       = 136
	offCreateTime   = 144
	offUpdateTime   = 152
	offResyncOffset = 160
	offLogOffset    = 168
	offLogBytes     = 176
	offReserved1    = 184
	offRoles        = 256
	roleEntrySize   = 32
	offReserved2    = offRoles + RoleTableSize*roleEntrySize // 2304
)

// Flag bits.
const (
	flagClean  = 1 << 0
	knownFlags = flagClean
)

// RoleState is the state of one entry of the role table.
type RoleState uint32

// Role states. A role of a running array is RoleActive (in sync),
// RoleRebuilding (being rebuilt: in sync below its recovery offset),
// RoleFaulty (its member failed and is never read) or RoleMissing (no member
// holds it). RoleSpare only appears in entries past the member count, naming
// a spare; RoleUnused marks an empty entry.
const (
	RoleUnused     RoleState = 0
	RoleActive     RoleState = 1
	RoleFaulty     RoleState = 2
	RoleRebuilding RoleState = 3
	RoleMissing    RoleState = 4
	RoleSpare      RoleState = 5
)

func (s RoleState) String() string {
	switch s {
	case RoleUnused:
		return "unused"
	case RoleActive:
		return "active"
	case RoleFaulty:
		return "faulty"
	case RoleRebuilding:
		return "rebuilding"
	case RoleMissing:
		return "missing"
	case RoleSpare:
		return "spare"
	}
	return fmt.Sprintf("state(%d)", uint32(s))
}

// RoleEntry is one entry of the role table.
type RoleEntry struct {
	State RoleState
	// RecoveryOffset is, for a rebuilding role, the sector (relative to the
	// data offset) below which the role's member is in sync; zero otherwise.
	RecoveryOffset uint64
	// Member is the UUID of the member holding the role (for a missing
	// role, of the last member that held it, or zero).
	Member [16]byte
}

// Superblock is the decoded on-disk superblock of one member (see the
// format above). The array-wide fields (UUID, name, geometry, events, clean,
// times and the role table) are the same on every member written at one
// generation; Role, MemberUUID, DataOffset, DataSectors and the bitmap area
// are this member's own.
//
// Superblock values are comparable with ==.
type Superblock struct {
	ArrayUUID [16]byte
	Name      string // up to ArrayNameMax bytes of UTF-8, no control characters, no '/'
	// Level is the RAID level: 0, 1, 5, 6 or 10.
	Level uint32
	// Layout is md's layout number: 0 for RAID 0 and 1, near | far<<8 |
	// offset<<16 for RAID 10 (Layout.MD; layout version 0), md's
	// algorithm 0..3 for RAID 5 and 6 (ParityLayout).
	Layout       uint32
	ChunkSectors uint32
	Members      uint32 // raid disks: the number of roles
	Role         uint32 // this member's role, or SpareRole
	MemberUUID   [16]byte
	DataOffset   uint64 // bytes from the start of the member; a multiple of DataOffsetAlign
	DataSectors  uint64 // usable sectors from DataOffset on
	BitmapOffset uint64 // bytes from the start of the member; 0 if BitmapBytes is 0
	BitmapBytes  uint64
	Events       uint64 // generation, >= 1
	Clean        bool   // the array was stopped cleanly
	CreateTime   int64  // Unix nanoseconds
	UpdateTime   int64  // Unix nanoseconds
	Roles        [RoleTableSize]RoleEntry

	// ResyncOffset is, for an array that is not clean, the array sector
	// from which its copies must be resynced (md's resync_offset): 0 after
	// a crash, where a resync stopped when the array was stopped part-way
	// through one. Zero when clean.
	ResyncOffset uint64
	// LogOffset and LogBytes are the write-hole log area of a raid5/6
	// member (engine/raid56_log.go), both 0 without one: bytes from the
	// start of the member, between the bitmap area and the data offset.
	LogOffset, LogBytes uint64
}

// Errors. ParseSuperblock's errors wrap ErrNoSuperblock or
// ErrCorruptSuperblock (the latter also ErrBadChecksum or ErrUnknownVersion
// when that is the reason); use errors.Is.
var (
	// ErrNoSuperblock: the block does not start with the magic: a zeroed,
	// foreign or never-created device.
	ErrNoSuperblock = errors.New("no ublk-raid superblock")
	// ErrCorruptSuperblock: the magic is there but the block is unusable.
	ErrCorruptSuperblock = errors.New("corrupt superblock")
	// ErrBadChecksum is the reason of a corrupt superblock whose checksum
	// does not match.
	ErrBadChecksum = errors.New("checksum mismatch")
	// ErrUnknownVersion is the reason of a corrupt superblock in a format
	// version this build does not know (written by a newer ublk-raid).
	ErrUnknownVersion = errors.New("unknown format version")
	// ErrInvalidSuperblock: MarshalBinary or Validate refused a value.
	ErrInvalidSuperblock = errors.New("invalid superblock")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Reserve returns the data offset, in bytes, for a member of memberBytes
// with a write-intent bitmap of bitmapBytes: room for the superblock, the
// bitmap (placed at SuperblockOffset+SuperblockSize, rounded up to 4 KiB),
// headroom so the bitmap can grow later without moving data (like mdadm:
// memberBytes/1024 rounded down to a power of two, at most 128 MiB) and the
// superblock's shadow copy, rounded up to 1 MiB and at least 1 MiB. It does
// not check that the result fits in the member.
func Reserve(memberBytes uint64, bitmapBytes uint64) (dataOffset uint64) {
	var headroom uint64
	if memberBytes >= 1<<10 {
		headroom = min(uint64(1)<<(bits.Len64(memberBytes>>10)-1), 128<<20)
	}
	if headroom < BitmapAlign {
		headroom = 0
	}
	end := uint64(SuperblockOffset + SuperblockSize)
	for _, n := range []uint64{roundUp(bitmapBytes, BitmapAlign), headroom, SuperblockSize} {
		if end > math.MaxUint64-n {
			return math.MaxUint64 &^ (DataOffsetAlign - 1)
		}
		end += n
	}
	return max(roundUp(end, DataOffsetAlign), DataOffsetAlign)
}

// roundUp rounds n up to a multiple of the power of two a, saturating.
func roundUp(n, a uint64) uint64 {
	if n > math.MaxUint64-(a-1) {
		return math.MaxUint64 &^ (a - 1)
	}
	return (n + a - 1) &^ (a - 1)
}

// IsSpare reports whether the member is a spare.
func (sb *Superblock) IsSpare() bool { return sb.Role == SpareRole }

// CheckMemberSize returns an error (wrapping ErrCorruptSuperblock) if a
// member of memberBytes cannot hold what the superblock says is on it: the
// superblock, the reserved area with the bitmap (which ends at the data
// offset) and the data area must all end within the member (a truncated or
// different device, or a crafted superblock). The superblock must be valid
// (ParseSuperblock or Validate), so the bitmap area lies below the data
// offset and the data area's end does not overflow.
func (sb *Superblock) CheckMemberSize(memberBytes uint64) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: truncated or a different device, or a crafted superblock", ErrCorruptSuperblock, fmt.Sprintf(format, args...))
	}
	if memberBytes < SuperblockOffset+SuperblockSize {
		return fail("member is %d bytes, too small to hold the superblock", memberBytes)
	}
	if sb.BitmapBytes != 0 && sb.BitmapOffset+sb.BitmapBytes > memberBytes {
		return fail("bitmap area at byte %d, %d bytes, ends past the member's end (%d bytes)", sb.BitmapOffset, sb.BitmapBytes, memberBytes)
	}
	if sb.LogBytes != 0 && sb.LogOffset+sb.LogBytes > memberBytes {
		return fail("write-hole log area at byte %d, %d bytes, ends past the member's end (%d bytes)", sb.LogOffset, sb.LogBytes, memberBytes)
	}
	if sb.DataOffset >= memberBytes {
		return fail("data offset %d is past the member's end (%d bytes)", sb.DataOffset, memberBytes)
	}
	if room := (memberBytes - sb.DataOffset) / sbSector; sb.DataSectors > room {
		return fail("data size of %d sectors from data offset %d ends at byte %d, past the member's end (%d bytes; room for %d sectors)",
			sb.DataSectors, sb.DataOffset, sb.DataOffset+sb.DataSectors*sbSector, memberBytes, room)
	}
	return nil
}

// Validate checks the superblock's invariants (those ParseSuperblock
// enforces). Its errors wrap ErrInvalidSuperblock.
func (sb *Superblock) Validate() error {
	if err := sb.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSuperblock, err)
	}
	return nil
}

// MarshalBinary validates the superblock and encodes it into a
// SuperblockSize block with its checksum.
func (sb *Superblock) MarshalBinary() ([]byte, error) {
	if err := sb.Validate(); err != nil {
		return nil, err
	}
	return sb.encode(), nil
}

// encode writes the block without validating.
func (sb *Superblock) encode() []byte {
	b := make([]byte, SuperblockSize)
	le := binary.LittleEndian
	copy(b[offMagic:], SuperblockMagic)
	le.PutUint32(b[offVersion:], FormatVersion)
	var flags uint32
	if sb.Clean {
		flags |= flagClean
	}
	le.PutUint32(b[offFlags:], flags)
	le.PutUint32(b[offLevel:], sb.Level)
	le.PutUint32(b[offLayout:], sb.Layout)
	le.PutUint32(b[offChunk:], sb.ChunkSectors)
	le.PutUint32(b[offMembers:], sb.Members)
	le.PutUint32(b[offRole:], sb.Role)
	copy(b[offArrayUUID:offArrayUUID+16], sb.ArrayUUID[:])
	copy(b[offMemberUUID:offMemberUUID+16], sb.MemberUUID[:])
	copy(b[offName:offName+ArrayNameMax], sb.Name)
	le.PutUint64(b[offDataOffset:], sb.DataOffset)
	le.PutUint64(b[offDataSectors:], sb.DataSectors)
	le.PutUint64(b[offBitmapOffset:], sb.BitmapOffset)
	le.PutUint64(b[offBitmapBytes:], sb.BitmapBytes)
	le.PutUint64(b[offEvents:], sb.Events)
	le.PutUint64(b[offCreateTime:], uint64(sb.CreateTime))
	le.PutUint64(b[offUpdateTime:], uint64(sb.UpdateTime))
	le.PutUint64(b[offResyncOffset:], sb.ResyncOffset)
	le.PutUint64(b[offLogOffset:], sb.LogOffset)
	le.PutUint64(b[offLogBytes:], sb.LogBytes)
	for i, e := range sb.Roles {
		o := offRoles + i*roleEntrySize
		le.PutUint32(b[o:], uint32(e.State))
		le.PutUint64(b[o+8:], e.RecoveryOffset)
		copy(b[o+16:o+32], e.Member[:])
	}
	seal(b)
	return b
}

// seal stores the checksum of b[:SuperblockSize].
func seal(b []byte) {
	binary.LittleEndian.PutUint32(b[offChecksum:], checksum(b))
}

// checksum is the CRC-32C of b[:SuperblockSize] with the checksum field
// taken as zero.
func checksum(b []byte) uint32 {
	var zero [4]byte
	c := crc32.Update(0, castagnoli, b[:offChecksum])
	c = crc32.Update(c, castagnoli, zero[:])
	return crc32.Update(c, castagnoli, b[offChecksum+4:SuperblockSize])
}

// ParseSuperblock decodes and validates the SuperblockSize block at the
// start of b (read from SuperblockOffset of a member). A block without the
// magic gives an error wrapping ErrNoSuperblock; one with the magic but an
// unknown version, a bad checksum, a non-zero reserved byte or impossible
// values gives an error wrapping ErrCorruptSuperblock.
func ParseSuperblock(b []byte) (*Superblock, error) {
	if len(b) < SuperblockSize {
		return nil, fmt.Errorf("superblock buffer is %d bytes, need %d", len(b), SuperblockSize)
	}
	b = b[:SuperblockSize]
	if string(b[offMagic:offMagic+8]) != SuperblockMagic {
		return nil, ErrNoSuperblock
	}
	le := binary.LittleEndian
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %w", ErrCorruptSuperblock, fmt.Errorf(format, args...))
	}
	if v := le.Uint32(b[offVersion:]); v != FormatVersion {
		return nil, corrupt("%w %d (this build reads version %d; written by a newer ublk-raid?)", ErrUnknownVersion, v, FormatVersion)
	}
	if got, want := le.Uint32(b[offChecksum:]), checksum(b); got != want {
		return nil, corrupt("%w (stored %#08x, computed %#08x)", ErrBadChecksum, got, want)
	}
	flags := le.Uint32(b[offFlags:])
	if flags&^knownFlags != 0 {
		return nil, corrupt("unknown flags %#x", flags&^knownFlags)
	}
	if o := firstNonZero(b[offReserved1:offRoles]); o >= 0 {
		return nil, corrupt("reserved byte %d is not zero", offReserved1+o)
	}
	if o := firstNonZero(b[offReserved2:]); o >= 0 {
		return nil, corrupt("reserved byte %d is not zero", offReserved2+o)
	}
	name, err := decodeName(b[offName : offName+ArrayNameMax])
	if err != nil {
		return nil, corrupt("%w", err)
	}
	sb := &Superblock{
		Name:         name,
		Level:        le.Uint32(b[offLevel:]),
		Layout:       le.Uint32(b[offLayout:]),
		ChunkSectors: le.Uint32(b[offChunk:]),
		Members:      le.Uint32(b[offMembers:]),
		Role:         le.Uint32(b[offRole:]),
		DataOffset:   le.Uint64(b[offDataOffset:]),
		DataSectors:  le.Uint64(b[offDataSectors:]),
		BitmapOffset: le.Uint64(b[offBitmapOffset:]),
		BitmapBytes:  le.Uint64(b[offBitmapBytes:]),
		Events:       le.Uint64(b[offEvents:]),
		Clean:        flags&flagClean != 0,
		CreateTime:   int64(le.Uint64(b[offCreateTime:])),
		UpdateTime:   int64(le.Uint64(b[offUpdateTime:])),
		ResyncOffset: le.Uint64(b[offResyncOffset:]),
		LogOffset:    le.Uint64(b[offLogOffset:]),
		LogBytes:     le.Uint64(b[offLogBytes:]),
	}
	copy(sb.ArrayUUID[:], b[offArrayUUID:])
	copy(sb.MemberUUID[:], b[offMemberUUID:])
	for i := range sb.Roles {
		o := offRoles + i*roleEntrySize
		if r := le.Uint32(b[o+4:]); r != 0 {
			return nil, corrupt("role table entry %d: reserved field is %#x, not zero", i, r)
		}
		e := &sb.Roles[i]
		e.State = RoleState(le.Uint32(b[o:]))
		e.RecoveryOffset = le.Uint64(b[o+8:])
		copy(e.Member[:], b[o+16:o+32])
	}
	if err := sb.validate(); err != nil {
		return nil, corrupt("%w", err)
	}
	return sb, nil
}

func firstNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

// decodeName returns the NUL-padded name in b.
func decodeName(b []byte) (string, error) {
	n := len(b)
	for i, c := range b {
		if c == 0 {
			n = i
			break
		}
	}
	if o := firstNonZero(b[n:]); o >= 0 {
		return "", fmt.Errorf("name is not NUL-padded (byte %d after the terminating NUL is %#02x)", n+o, b[n+o])
	}
	return string(b[:n]), nil
}

// ValidName checks an array name (the superblock's rule; the daemon checks
// requests by it before any member is opened).
func ValidName(name string) error {
	if len(name) > ArrayNameMax {
		return fmt.Errorf("name %q is %d bytes, longer than %d", name, len(name), ArrayNameMax)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("name %q is not valid UTF-8", name)
	}
	for _, r := range name {
		if r == 0 || unicode.IsControl(r) || r == '/' {
			return fmt.Errorf("name %q contains %q (no NUL, control characters or '/')", name, r)
		}
	}
	return nil
}

// raid10Copies decodes md's RAID 10 layout number (near | far<<8 |
// offset<<16, layout version 0): the number of copies, near*far.
func raid10Copies(layout uint32) (int, error) {
	near, far := int(layout&0xff), int(layout>>8&0xff)
	if layout>>17 != 0 {
		return 0, fmt.Errorf("RAID 10 layout %#x: layout version %d, not 0", layout, layout>>17)
	}
	if near < 1 || far < 1 || near*far < 2 {
		return 0, fmt.Errorf("RAID 10 layout %#x: %d near × %d far copies, need at least 2 copies", layout, near, far)
	}
	return near * far, nil
}

// validate checks the invariants; errors are bare reasons.
func (sb *Superblock) validate() error {
	if sb.Clean && sb.ResyncOffset != 0 {
		return fmt.Errorf("clean array with resync offset %d", sb.ResyncOffset)
	}
	if sb.Members != 0 && sb.ResyncOffset/uint64(sb.Members) > sb.DataSectors {
		return fmt.Errorf("resync offset %d is past any array of %d members of %d sectors", sb.ResyncOffset, sb.Members, sb.DataSectors)
	}
	if sb.ArrayUUID == ([16]byte{}) {
		return errors.New("array UUID is zero")
	}
	if sb.MemberUUID == ([16]byte{}) {
		return errors.New("member UUID is zero")
	}
	if err := ValidName(sb.Name); err != nil {
		return err
	}
	if sb.Members == 0 || sb.Members > RoleTableSize {
		return fmt.Errorf("member count %d is not in 1..%d", sb.Members, RoleTableSize)
	}
	switch sb.Level {
	case 0, 1:
		if sb.Layout != 0 {
			return fmt.Errorf("RAID %d layout %#x is not 0", sb.Level, sb.Layout)
		}
	case uint32(Level5), uint32(Level6):
		if err := validateParityFields(sb.Level, sb.Layout, sb.Members); err != nil {
			return err
		}
	case 10:
		copies, err := raid10Copies(sb.Layout)
		if err != nil {
			return err
		}
		if copies > int(sb.Members) {
			return fmt.Errorf("RAID 10 layout %#x has %d copies but only %d members", sb.Layout, copies, sb.Members)
		}
	default:
		return fmt.Errorf("RAID level %d is not 0, 1, 5, 6 or 10", sb.Level)
	}
	c := sb.ChunkSectors
	if !(c == 0 && sb.Level == 1) && (c < sbMinChunk || c&(c-1) != 0) {
		return fmt.Errorf("chunk of %d sectors is not a power of two >= %d", c, sbMinChunk)
	}
	if sb.Role >= sb.Members && sb.Role != SpareRole {
		return fmt.Errorf("role %d is out of range (member count %d)", sb.Role, sb.Members)
	}
	if sb.Role == SpareRole && sb.Level == 0 {
		return errors.New("spare member in a RAID 0 array")
	}
	if sb.DataOffset < DataOffsetAlign || sb.DataOffset%DataOffsetAlign != 0 {
		return fmt.Errorf("data offset %d is not a multiple of 1 MiB past the superblock", sb.DataOffset)
	}
	if sb.DataSectors == 0 || sb.DataSectors%(BitmapAlign/sbSector) != 0 {
		return fmt.Errorf("data size of %d sectors is not a positive multiple of 4 KiB", sb.DataSectors)
	}
	if sb.DataSectors > (math.MaxUint64-sb.DataOffset)/sbSector {
		return fmt.Errorf("data size of %d sectors at offset %d overflows", sb.DataSectors, sb.DataOffset)
	}
	if sb.BitmapBytes == 0 {
		if sb.BitmapOffset != 0 {
			return fmt.Errorf("bitmap offset %d without a bitmap", sb.BitmapOffset)
		}
	} else {
		if sb.BitmapOffset%BitmapAlign != 0 || sb.BitmapBytes%BitmapAlign != 0 {
			return fmt.Errorf("bitmap area at %d, %d bytes, is not 4 KiB aligned", sb.BitmapOffset, sb.BitmapBytes)
		}
		if sb.BitmapOffset < SuperblockOffset+SuperblockSize {
			return fmt.Errorf("bitmap offset %d overlaps the superblock", sb.BitmapOffset)
		}
		if sb.BitmapOffset >= sb.DataOffset || sb.BitmapBytes > sb.DataOffset-sb.BitmapOffset {
			return fmt.Errorf("bitmap area at %d, %d bytes, overlaps the data at %d", sb.BitmapOffset, sb.BitmapBytes, sb.DataOffset)
		}
		if sb.BitmapBytes > MaxBitmapBytes {
			return fmt.Errorf("bitmap area of %d bytes is larger than the maximum of %d (128 MiB)", sb.BitmapBytes, MaxBitmapBytes)
		}
	}
	if err := sb.validateLog(); err != nil {
		return err
	}
	if sb.Events == 0 {
		return errors.New("events is 0")
	}
	if sb.Events > MaxEvents {
		return fmt.Errorf("events %d is past the maximum of %d (the counter would wrap)", sb.Events, uint64(MaxEvents))
	}
	return sb.validateRoles()
}

func (sb *Superblock) validateRoles() error {
	seen := make(map[[16]byte]int, len(sb.Roles))
	for i, e := range sb.Roles {
		inRange := i < int(sb.Members)
		switch e.State {
		case RoleUnused:
			if inRange {
				return fmt.Errorf("role %d is unused in an array of %d members", i, sb.Members)
			}
			if e != (RoleEntry{}) {
				return fmt.Errorf("unused role table entry %d is not zero", i)
			}
			continue
		case RoleActive, RoleFaulty, RoleRebuilding, RoleMissing:
			if !inRange {
				return fmt.Errorf("role table entry %d is %s, past the member count %d", i, e.State, sb.Members)
			}
		case RoleSpare:
			if inRange {
				return fmt.Errorf("role %d is spare (spares are listed after the %d roles)", i, sb.Members)
			}
			if sb.Level == 0 {
				return errors.New("spare in a RAID 0 array")
			}
		default:
			return fmt.Errorf("role table entry %d has unknown state %d", i, uint32(e.State))
		}
		if e.State == RoleRebuilding {
			if sb.Level == 0 {
				return fmt.Errorf("role %d is rebuilding in a RAID 0 array", i)
			}
			if e.RecoveryOffset > sb.DataSectors {
				return fmt.Errorf("role %d recovery offset %d is past the data size %d", i, e.RecoveryOffset, sb.DataSectors)
			}
		} else if e.RecoveryOffset != 0 {
			return fmt.Errorf("role table entry %d is %s but has recovery offset %d", i, e.State, e.RecoveryOffset)
		}
		if e.Member == ([16]byte{}) {
			if e.State != RoleMissing {
				return fmt.Errorf("role table entry %d is %s without a member UUID", i, e.State)
			}
			continue
		}
		if j, dup := seen[e.Member]; dup {
			return fmt.Errorf("member %s holds both role table entries %d and %d", UUIDString(e.Member), j, i)
		}
		seen[e.Member] = i
	}
	// This member appears in the table at most once, where its role says.
	i, named := seen[sb.MemberUUID]
	switch {
	case sb.Role == SpareRole:
		if named && i < int(sb.Members) {
			return fmt.Errorf("spare member %s is named by role %d", UUIDString(sb.MemberUUID), i)
		}
	case !named || i != int(sb.Role):
		return fmt.Errorf("this member's role %d does not name it (%s) in the role table", sb.Role, UUIDString(sb.MemberUUID))
	case sb.Roles[i].State == RoleMissing:
		return fmt.Errorf("this member's role %d is marked missing", sb.Role)
	}
	return nil
}

// UUIDString formats a UUID as 8-4-4-4-12 lower-case hex digits.
func UUIDString(u [16]byte) string {
	var s strings.Builder
	for i, part := range [][]byte{u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]} {
		if i > 0 {
			s.WriteByte('-')
		}
		s.WriteString(hex.EncodeToString(part))
	}
	return s.String()
}

// validateLog checks the write-hole log area: none (both fields 0), or,
// for raid5/6 only, a 4 KiB aligned area of MinLogBytes to MaxLogBytes
// past the superblock, clear of the bitmap area, ending at or below the
// data offset.
func (sb *Superblock) validateLog() error {
	if sb.LogBytes == 0 {
		if sb.LogOffset != 0 {
			return fmt.Errorf("write-hole log offset %d without a log", sb.LogOffset)
		}
		return nil
	}
	if !IsParityLevel(Level(sb.Level)) {
		return fmt.Errorf("a write-hole log area in a %s array", Level(sb.Level))
	}
	if sb.LogOffset%BitmapAlign != 0 || sb.LogBytes%BitmapAlign != 0 {
		return fmt.Errorf("write-hole log area at %d, %d bytes, is not 4 KiB aligned", sb.LogOffset, sb.LogBytes)
	}
	if sb.LogBytes < MinLogBytes || sb.LogBytes > MaxLogBytes {
		return fmt.Errorf("write-hole log area of %d bytes is not %d to %d", sb.LogBytes, MinLogBytes, MaxLogBytes)
	}
	if sb.LogOffset < SuperblockOffset+SuperblockSize {
		return fmt.Errorf("write-hole log offset %d overlaps the superblock", sb.LogOffset)
	}
	if sb.LogOffset >= sb.DataOffset || sb.LogBytes > sb.DataOffset-sb.LogOffset {
		return fmt.Errorf("write-hole log area at %d, %d bytes, overlaps the data at %d", sb.LogOffset, sb.LogBytes, sb.DataOffset)
	}
	if sb.BitmapBytes != 0 && sb.LogOffset < sb.BitmapOffset+sb.BitmapBytes && sb.BitmapOffset < sb.LogOffset+sb.LogBytes {
		return fmt.Errorf("write-hole log area at %d, %d bytes, overlaps the bitmap area at %d, %d bytes", sb.LogOffset, sb.LogBytes, sb.BitmapOffset, sb.BitmapBytes)
	}
	return nil
}
