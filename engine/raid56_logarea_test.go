package engine

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// pLogFixture is a valid raid5 member superblock with a write-hole log
// area of 256 KiB at the end of its 2 MiB reserved area.
func pLogFixture() *Superblock {
	sb := sbFixture()
	sb.Level, sb.Layout, sb.ChunkSectors, sb.Members = 5, uint32(LeftSymmetric), 128, 5
	sb.Roles[4] = RoleEntry{State: RoleActive, Member: sbUUID(0xe4)}
	sb.Roles[5] = RoleEntry{State: RoleSpare, Member: sbUUID(0xd3)}
	sb.Roles[2] = RoleEntry{State: RoleActive, Member: sbUUID(0xc2)}
	sb.Roles[3] = RoleEntry{State: RoleActive, Member: sbUUID(0xf5)}
	sb.LogOffset, sb.LogBytes = sb.DataOffset-256<<10, 256<<10
	return sb
}

func TestSuperblockLogArea(t *testing.T) {
	sb := pLogFixture()
	b := mustMarshal(t, sb)
	got, err := ParseSuperblock(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.LogOffset != sb.LogOffset || got.LogBytes != sb.LogBytes {
		t.Fatalf("log area %d+%d read back as %d+%d", sb.LogOffset, sb.LogBytes, got.LogOffset, got.LogBytes)
	}
	if le := b[offLogOffset : offLogOffset+16]; le[0] != 0 || le[2] != byte(sb.LogOffset>>16) || le[10] != byte(sb.LogBytes>>16) {
		t.Errorf("log offset and size not at bytes 168 and 176: % x", le)
	}
	if err := got.CheckMemberSize(2 << 30); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func(*Superblock)
		want string
	}{
		{"offset without a log", func(sb *Superblock) { sb.LogBytes = 0 }, "without a log"},
		{"raid10 with a log", func(sb *Superblock) { sb.Level, sb.Layout = 10, 0x102 }, "log area in a raid10"},
		{"raid1 with a log", func(sb *Superblock) { sb.Level, sb.Layout, sb.ChunkSectors = 1, 0, 0 }, "log area in a raid1"},
		{"unaligned offset", func(sb *Superblock) { sb.LogOffset += 512 }, "not 4 KiB aligned"},
		{"unaligned size", func(sb *Superblock) { sb.LogBytes -= 512; sb.LogOffset += 512 }, "not 4 KiB aligned"},
		{"too small", func(sb *Superblock) { sb.LogOffset, sb.LogBytes = sb.DataOffset-32<<10, 32<<10 }, "is not 65536 to"},
		{"too large", func(sb *Superblock) { sb.DataOffset = 128 << 20; sb.LogOffset, sb.LogBytes = 32<<20, 96<<20 }, "is not 65536 to"},
		{"over the superblock", func(sb *Superblock) { sb.LogOffset = 4096 }, "overlaps the superblock"},
		{"over the data", func(sb *Superblock) { sb.LogOffset += 4096 }, "overlaps the data"},
		{"at the data", func(sb *Superblock) { sb.LogOffset = sb.DataOffset }, "overlaps the data"},
		{"wrapping", func(sb *Superblock) { sb.LogOffset = 1<<64 - 4096 }, "overlaps the data"},
		{"over the bitmap", func(sb *Superblock) { sb.LogOffset = sb.BitmapOffset + 4096 }, "overlaps the bitmap"},
		{"under the bitmap", func(sb *Superblock) { sb.BitmapOffset = sb.LogOffset + 8192 }, "overlaps the bitmap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := pLogFixture()
			tc.f(sb)
			err := sb.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			// The same bytes on disk are refused as corrupt.
			good := pLogFixture()
			b := mustMarshal(t, good)
			putSuperblockRaw(b, sb)
			if _, err := ParseSuperblock(b); !errors.Is(err, ErrCorruptSuperblock) {
				t.Fatalf("parsed: %v, want ErrCorruptSuperblock", err)
			}
		})
	}
	// Bounded by the member: an area past its end.
	sb = pLogFixture()
	sb.DataOffset = 1 << 30
	sb.LogOffset = sb.DataOffset - sb.LogBytes
	if err := sb.CheckMemberSize(512 << 20); err == nil || !errors.Is(err, ErrCorruptSuperblock) {
		t.Fatalf("a log area past the member's end: %v", err)
	}
}

// putSuperblockRaw writes sb's log and layout fields into the encoded
// block b without validating, and reseals its checksum.
func putSuperblockRaw(b []byte, sb *Superblock) {
	le := binary.LittleEndian
	le.PutUint32(b[offLevel:], sb.Level)
	le.PutUint32(b[offLayout:], sb.Layout)
	le.PutUint32(b[offChunk:], sb.ChunkSectors)
	le.PutUint64(b[offDataOffset:], sb.DataOffset)
	le.PutUint64(b[offBitmapOffset:], sb.BitmapOffset)
	le.PutUint64(b[offLogOffset:], sb.LogOffset)
	le.PutUint64(b[offLogBytes:], sb.LogBytes)
	seal(b)
}

// NewSuperblocks places a raid5/6 log area at the end of the reserved
// area, past the bitmap, and refuses one for other levels.
func TestNewSuperblocksLogArea(t *testing.T) {
	spec := ArraySpec{Level: 5, Layout: uint32(LeftSymmetric), ChunkSectors: 128,
		MemberBytes: []uint64{1 << 30, 1 << 30, 1<<30 + 4096}, BitmapBytes: 8192, LogBytes: 1 << 20}
	sbs, err := NewSuperblocks(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.LogBytes != 1<<20 || sb.LogOffset+sb.LogBytes != sb.DataOffset || sb.LogOffset < sb.BitmapOffset+sb.BitmapBytes {
			t.Fatalf("log area %d+%d, bitmap %d+%d, data at %d", sb.LogOffset, sb.LogBytes, sb.BitmapOffset, sb.BitmapBytes, sb.DataOffset)
		}
		if sb.DataOffset < Reserve(1<<30, 8192)+0 {
			t.Fatalf("data offset %d below the bitmap's reserve", sb.DataOffset)
		}
	}
	spec.Level, spec.Layout = 1, 0
	spec.ChunkSectors = 0
	if _, err := NewSuperblocks(spec); err == nil {
		t.Fatal("a raid1 with a write-hole log area accepted")
	}
	spec.Level, spec.LogBytes = 5, MaxLogBytes+4096
	spec.ChunkSectors, spec.Layout = 128, uint32(LeftSymmetric)
	if _, err := NewSuperblocks(spec); err == nil {
		t.Fatal("a log area above the maximum accepted")
	}
}
