package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The superblock's shadow copy.
//
// A superblock update on a device whose atomic write unit is smaller than
// 4 KiB can be torn by a power cut: some sectors new, some old, under a
// checksum that then fails. Where the member's reserved area has room, each
// update writes the block twice, in order, each durably: first the shadow
// copy, in the 4 KiB just below the write-hole log (raid5/6) or the data
// (the top of the reserved area, above the bitmap and its headroom), then
// the primary at SuperblockOffset. A power cut then tears at most one of
// the two: a torn shadow leaves the primary as it was (the update did not
// happen), a torn primary has the shadow holding the update in full.
//
// ReadSuperblock reads the primary and turns to the shadow only when the
// primary carries the magic and fails its checksum (what a tear leaves),
// and takes the shadow only if it is valid in every field, names the same
// array and member as the torn primary's first sector (which a tear keeps
// whole, old or new), and lies where its own fields place it. A primary
// without the magic (a device wiped, or never a member) or corrupt for
// another reason (a valid checksum over impossible values, an unknown
// version) is never overridden by a shadow. The shadow is always as new as
// the primary or one update newer, so taking it never rolls a member back.
//
// A member whose reserved area has no free 4 KiB below the log or the data
// (only arrays made before the shadow existed whose bitmap filled all the
// headroom; Reserve leaves the room now) has no shadow: its updates write
// the primary only, as before.

// ShadowOffset returns the byte offset of the superblock's shadow copy on
// a member with this superblock's layout, and false where the layout has
// no room for one (the slot would overlap the superblock, the bitmap area,
// the write-hole log or the data).
func (sb *Superblock) ShadowOffset() (uint64, bool) {
	top := sb.DataOffset
	if sb.LogBytes != 0 {
		top = sb.LogOffset
	}
	if top < SuperblockOffset+2*SuperblockSize || top%BitmapAlign != 0 {
		return 0, false
	}
	off := top - SuperblockSize
	end := off + SuperblockSize
	overlaps := func(start, n uint64) bool { return n != 0 && off < start+n && start < end }
	if overlaps(sb.BitmapOffset, sb.BitmapBytes) || overlaps(sb.LogOffset, sb.LogBytes) || end > sb.DataOffset {
		return 0, false
	}
	return off, true
}

// ShadowOffsetOf is ShadowOffset for an encoded block (MarshalBinary's):
// where its writer puts the shadow copy.
func ShadowOffsetOf(b []byte) (uint64, bool) {
	if len(b) < SuperblockSize {
		return 0, false
	}
	return layoutOf(b).ShadowOffset()
}

// layoutOf decodes the fields that place the areas of a member (all in
// the block's first 512-byte sector), without validating anything.
func layoutOf(b []byte) *Superblock {
	le := binary.LittleEndian
	return &Superblock{
		DataOffset:   le.Uint64(b[offDataOffset:]),
		BitmapOffset: le.Uint64(b[offBitmapOffset:]),
		BitmapBytes:  le.Uint64(b[offBitmapBytes:]),
		LogOffset:    le.Uint64(b[offLogOffset:]),
		LogBytes:     le.Uint64(b[offLogBytes:]),
	}
}

// ReadSuperblock reads a member's superblock through read (n bytes at byte
// off of the member, a device of size bytes) and parses it: the primary
// copy, or its shadow when the primary was torn (see above; shadow
// reports which). Its errors are
// read's (for the primary, or for the shadow of a torn primary: not
// ErrCorruptSuperblock then) or the primary's ParseSuperblock error. It
// does not bound the result by the member (CheckMemberSize).
func ReadSuperblock(read func(off int64, n int) ([]byte, error), size int64) (sb *Superblock, shadow bool, err error) {
	b, err := read(SuperblockOffset, SuperblockSize)
	if err != nil {
		return nil, false, err
	}
	if len(b) < SuperblockSize {
		return nil, false, fmt.Errorf("superblock read gave %d bytes, want %d", len(b), SuperblockSize)
	}
	sb, err = ParseSuperblock(b)
	if err == nil || !errors.Is(err, ErrBadChecksum) {
		return sb, false, err
	}
	off, ok := ShadowOffsetOf(b)
	if !ok || off > math.MaxInt64-SuperblockSize || int64(off)+SuperblockSize > size {
		// No slot, or none within the device (a damaged header's
		// fields): no shadow, the primary is corrupt.
		return nil, false, err
	}
	sbb, rerr := read(int64(off), SuperblockSize)
	if rerr == nil && len(sbb) < SuperblockSize {
		rerr = fmt.Errorf("read gave %d bytes, want %d", len(sbb), SuperblockSize)
	}
	if rerr != nil {
		// The device's answer, not a verdict on its contents: the
		// update may be whole in the shadow.
		return nil, false, fmt.Errorf("superblock torn (%v), and its shadow copy at byte %d cannot be read: %w", err, off, rerr)
	}
	s, perr := ParseSuperblock(sbb)
	if perr != nil {
		return nil, false, err
	}
	var array, member [16]byte
	copy(array[:], b[offArrayUUID:])
	copy(member[:], b[offMemberUUID:])
	if so, ok := s.ShadowOffset(); !ok || so != off || s.ArrayUUID != array || s.MemberUUID != member {
		return nil, false, err
	}
	return s, true, nil
}
