package engine

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The write-hole log area of a raid5/6 member (Superblock.LogOffset,
// LogBytes): a 4096-byte header, then entries (ParityLogEntry), each
// starting on a 4 KiB boundary, written in rings (one per queue: no lock
// between queues) and found again at assembly by scanning the area.
//
// The header holds the checkpoint C: every write whose entry's sequence
// number is below C is durable (its data and parity writes reached
// stable storage), so its entry is dead and its space reusable. A
// recovery replays the live entries (ParityLogReplay) and then writes a
// checkpoint past all of them. Every member's header says C; a torn one
// is skipped, and the largest valid C counts (a C was written only when
// true).
//
//	offset  size  field
//	     0     8  magic "ublkplgh"
//	     8     4  format version (1)
//	    12     4  checksum: CRC-32C of the 4096 bytes with this field zero
//	    16     4  flags: none defined, zero
//	    20     4  reserved
//	    24    16  array UUID
//	    40     8  checkpoint C (>= 1)
//	    48  4048  reserved
const (
	// ParityLogHeaderMagic is the first 8 bytes of a log area.
	ParityLogHeaderMagic = "ublkplgh"
	plhOffMagic          = 0
	plhOffVersion        = 8
	plhOffChecksum       = 12
	plhOffFlags          = 16
	plhOffUUID           = 24
	plhOffCheckpoint     = 40
	plhOffReserved       = 48
)

// ParityLogHeader is the header of a member's write-hole log area.
type ParityLogHeader struct {
	Array      [16]byte
	Checkpoint uint64 // >= 1: entries numbered below it are dead
}

// Encode writes the header into the first 4096 bytes of b.
func (h *ParityLogHeader) Encode(b []byte) error {
	if len(b) < ParityLogHeaderSize {
		return fmt.Errorf("write-hole log header needs %d bytes, not %d", ParityLogHeaderSize, len(b))
	}
	if h.Array == ([16]byte{}) || h.Checkpoint == 0 {
		return fmt.Errorf("%w: header with a zero array UUID or checkpoint", ErrInvalidParityLogEntry)
	}
	blk := b[:ParityLogHeaderSize]
	clear(blk)
	le := binary.LittleEndian
	copy(blk[plhOffMagic:], ParityLogHeaderMagic)
	le.PutUint32(blk[plhOffVersion:], ParityLogVersion)
	copy(blk[plhOffUUID:plhOffUUID+16], h.Array[:])
	le.PutUint64(blk[plhOffCheckpoint:], h.Checkpoint)
	le.PutUint32(blk[plhOffChecksum:], parityLogHeaderSum(blk))
	return nil
}

// DecodeParityLogHeader decodes and checks the log area header at the
// start of b for the array uuid; every failure wraps ErrParityLogCorrupt.
func DecodeParityLogHeader(b []byte, uuid [16]byte) (ParityLogHeader, error) {
	var h ParityLogHeader
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: header: %s", ErrParityLogCorrupt, fmt.Sprintf(format, args...))
	}
	if len(b) < ParityLogHeaderSize {
		return h, corrupt("%d bytes, shorter than %d", len(b), ParityLogHeaderSize)
	}
	blk := b[:ParityLogHeaderSize]
	if string(blk[plhOffMagic:plhOffMagic+8]) != ParityLogHeaderMagic {
		return h, fmt.Errorf("%w: header: %w", ErrParityLogCorrupt, ErrNoParityLogEntry)
	}
	le := binary.LittleEndian
	if v := le.Uint32(blk[plhOffVersion:]); v != ParityLogVersion {
		return h, fmt.Errorf("%w: header: %w %d", ErrParityLogCorrupt, ErrUnknownVersion, v)
	}
	if got, want := le.Uint32(blk[plhOffChecksum:]), parityLogHeaderSum(blk); got != want {
		return h, fmt.Errorf("%w: header: %w (stored %#08x, computed %#08x)", ErrParityLogCorrupt, ErrBadChecksum, got, want)
	}
	if f := le.Uint32(blk[plhOffFlags:]); f != 0 {
		return h, corrupt("unknown flags %#x", f)
	}
	if o := firstNonZero(blk[plhOffFlags+4 : plhOffUUID]); o >= 0 {
		return h, corrupt("reserved byte %d is not zero", plhOffFlags+4+o)
	}
	if o := firstNonZero(blk[plhOffReserved:]); o >= 0 {
		return h, corrupt("reserved byte %d is not zero", plhOffReserved+o)
	}
	copy(h.Array[:], blk[plhOffUUID:plhOffUUID+16])
	if h.Array != uuid {
		return ParityLogHeader{}, corrupt("array UUID %s is not this array's (%s)", UUIDString(h.Array), UUIDString(uuid))
	}
	h.Checkpoint = le.Uint64(blk[plhOffCheckpoint:])
	if h.Checkpoint == 0 || h.Checkpoint > MaxParityLogCheckpoint {
		return ParityLogHeader{}, corrupt("checkpoint %d is 0 or past %d", h.Checkpoint, uint64(MaxParityLogCheckpoint))
	}
	return h, nil
}

// ScanParityLog returns the valid entries of the log area area (a
// member's whole area, header first) for the array of geometry g and
// UUID uuid: every 4 KiB block past the header that starts an entry
// (DecodeParityLogEntry), the blocks of an entry found skipped. Torn,
// stale and foreign blocks are passed over. The entries' payloads alias
// area.
func ScanParityLog(area []byte, g ParityGeometry, uuid [16]byte) []ParityLogEntry {
	var out []ParityLogEntry
	for o := ParityLogHeaderSize; o+ParityLogHeaderSize <= len(area); {
		e, err := DecodeParityLogEntry(area[o:], g, uuid)
		if err != nil {
			o += ParityLogHeaderSize
			continue
		}
		out = append(out, e)
		o += int(roundUp(uint64(e.Size()), ParityLogHeaderSize))
	}
	return out
}

// MaxParityLogEntrySize is the largest entry geometry g's log can hold,
// bounded by an area of areaBytes: a header and a whole chunk of rows
// for each parity.
func MaxParityLogEntrySize(g ParityGeometry, areaBytes int) int {
	parity := 1
	if g.Level == Level6 {
		parity = 2
	}
	return min(ParityLogEntrySize(g.ChunkSectors, parity), max(areaBytes-ParityLogHeaderSize, 0))
}

// ParityLogScanWindow is the size of ScanParityLogFrom's window for
// geometry g's area of areaBytes: at least least bytes, and twice the
// largest entry, so that a window read again from an entry's start moves
// on by at least half of itself (a window of the largest entry could be
// read again at every 4 KiB block: 14,335 reads of 8 MiB for 8 MiB
// chunks); no more than the area, in whole 4 KiB blocks.
func ParityLogScanWindow(g ParityGeometry, areaBytes, least int) int {
	w := min(areaBytes, max(least, 2*MaxParityLogEntrySize(g, areaBytes)))
	return int(roundUp(uint64(w), ParityLogHeaderSize))
}

// ScanParityLogFrom is ScanParityLog over a member's area of areaBytes
// read through read (an offset within the area and a buffer to fill)
// into buf, one window at a time, so that a recovery holds one window
// and the entries it keeps rather than every member's whole area. buf
// must hold at least MaxParityLogEntrySize bytes (a multiple of 4096;
// ParityLogScanWindow's size reads the area at most about twice); a
// window is read again from an entry's start when the entry could reach
// past its end. Only the entries keep accepts are returned, their
// payloads copied out of buf. The entries found are ScanParityLog's.
func ScanParityLogFrom(read func(off int64, b []byte) error, areaBytes int, buf []byte, g ParityGeometry, uuid [16]byte, keep func(*ParityLogEntry) bool) ([]ParityLogEntry, error) {
	if need := MaxParityLogEntrySize(g, areaBytes); len(buf) < need || len(buf)%ParityLogHeaderSize != 0 {
		return nil, fmt.Errorf("write-hole log scan: a %d-byte window is not whole 4 KiB blocks holding the largest entry (%d bytes)", len(buf), need)
	}
	var out []ParityLogEntry
	maxEntry := MaxParityLogEntrySize(g, areaBytes)
	ws, wl := 0, 0 // the window: area offset and bytes read
	for o := ParityLogHeaderSize; o+ParityLogHeaderSize <= areaBytes; {
		if o+maxEntry > ws+wl && ws+wl < areaBytes {
			ws, wl = o, min(len(buf), areaBytes-o)
			if err := read(int64(ws), buf[:wl]); err != nil {
				return nil, err
			}
		}
		e, err := DecodeParityLogEntry(buf[o-ws:wl], g, uuid)
		if err != nil {
			o += ParityLogHeaderSize
			continue
		}
		o += int(roundUp(uint64(e.Size()), ParityLogHeaderSize))
		if !keep(&e) {
			continue
		}
		e.P, e.Q = clonePayload(e.P), clonePayload(e.Q)
		out = append(out, e)
	}
	return out, nil
}

func clonePayload(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// ParityLogReplay returns the entries a recovery replays, in the order
// it must: those numbered checkpoint or above (the others' writes are
// durable), each once (raid6 logs an entry on P's and Q's members), in
// increasing order, so that where two entries cover the same rows of a
// stripe the newer one's parity is what stays. (Every entry written gets
// its own number.)
func ParityLogReplay(entries []ParityLogEntry, checkpoint uint64) []ParityLogEntry {
	var out []ParityLogEntry
	for _, e := range entries {
		if e.Seq >= checkpoint {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b ParityLogEntry) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return slices.CompactFunc(out, func(a, b ParityLogEntry) bool {
		return a.Seq == b.Seq && a.Stripe == b.Stripe && a.RowLo == b.RowLo && a.RowHi == b.RowHi
	})
}
