package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// sbTB is what the helpers need of *testing.T and *rapid.T.
type sbTB interface {
	Helper()
	Fatalf(format string, args ...any)
}

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// sbUUID is a recognisable UUID: 16 bytes of b.
func sbUUID(b byte) (u [16]byte) {
	for i := range u {
		u[i] = b
	}
	return u
}

// sbFixture is a fixed superblock using every field: a 4-member
// RAID 10 n2 with a rebuilding role, a missing role and a spare.
func sbFixture() *Superblock {
	sb := &Superblock{
		ArrayUUID:    [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x4d, 0xef, 0x80, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07},
		Name:         "tank-é",
		Level:        10,
		Layout:       0x102,
		ChunkSectors: 1024,
		Members:      4,
		Role:         1,
		MemberUUID:   sbUUID(0xb1),
		DataOffset:   2 << 20,
		DataSectors:  2000000,
		BitmapOffset: 8192,
		BitmapBytes:  65536,
		Events:       42,
		Clean:        true,
		CreateTime:   1700000000123456789,
		UpdateTime:   1700000999987654321,
	}
	sb.Roles[0] = RoleEntry{State: RoleActive, Member: sbUUID(0xa0)}
	sb.Roles[1] = RoleEntry{State: RoleActive, Member: sbUUID(0xb1)}
	sb.Roles[2] = RoleEntry{State: RoleRebuilding, RecoveryOffset: 123456, Member: sbUUID(0xc2)}
	sb.Roles[3] = RoleEntry{State: RoleMissing}
	sb.Roles[4] = RoleEntry{State: RoleSpare, Member: sbUUID(0xd3)}
	return sb
}

func mustMarshal(t sbTB, sb *Superblock) []byte {
	t.Helper()
	b, err := sb.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

// sbUndump decodes an encoding/hex.Dump.
func sbUndump(t *testing.T, dump string) []byte {
	t.Helper()
	var out []byte
	for _, line := range strings.Split(strings.TrimRight(dump, "\n"), "\n") {
		hexPart, _, _ := strings.Cut(line, "|")
		fields := strings.Fields(hexPart)
		if len(fields) < 2 {
			t.Fatalf("bad dump line %q", line)
		}
		b, err := hex.DecodeString(strings.Join(fields[1:], ""))
		if err != nil {
			t.Fatalf("bad dump line %q: %v", line, err)
		}
		out = append(out, b...)
	}
	return out
}

func TestSuperblockGolden(t *testing.T) {
	path := filepath.Join("testdata", "superblock-v1.golden")
	b := mustMarshal(t, sbFixture())
	dump := hex.Dump(b)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(dump), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./engine -run SuperblockGolden -update to create it)", err)
	}
	if string(want) != dump {
		wb := sbUndump(t, string(want))
		for i := range min(len(wb), len(b)) {
			if wb[i] != b[i] {
				t.Fatalf("the superblock format changed: first difference at byte %d (%#02x, golden %#02x); if intended, bump FormatVersion and run with -update", i, b[i], wb[i])
			}
		}
		t.Fatalf("the superblock format changed: %d bytes, golden %d", len(b), len(wb))
	}
	// The golden block still parses to the same value: old arrays stay
	// readable.
	sb, err := ParseSuperblock(sbUndump(t, string(want)))
	if err != nil {
		t.Fatalf("ParseSuperblock(golden): %v", err)
	}
	if *sb != *sbFixture() {
		t.Errorf("ParseSuperblock(golden) = %+v, want %+v", sb, sbFixture())
	}
}

// TestSuperblockOffsets checks the documented field offsets.
func TestSuperblockOffsets(t *testing.T) {
	sb := sbFixture()
	b := mustMarshal(t, sb)
	if len(b) != SuperblockSize {
		t.Fatalf("len = %d", len(b))
	}
	le := binary.LittleEndian
	u32 := func(o int) uint32 { return le.Uint32(b[o:]) }
	u64 := func(o int) uint64 { return le.Uint64(b[o:]) }
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"version@8", uint64(u32(8)), 1},
		{"flags@16", uint64(u32(16)), 1},
		{"level@20", uint64(u32(20)), 10},
		{"layout@24", uint64(u32(24)), 0x102},
		{"chunk@28", uint64(u32(28)), 1024},
		{"members@32", uint64(u32(32)), 4},
		{"role@36", uint64(u32(36)), 1},
		{"data offset@104", u64(104), 2 << 20},
		{"data sectors@112", u64(112), 2000000},
		{"bitmap offset@120", u64(120), 8192},
		{"bitmap bytes@128", u64(128), 65536},
		{"events@136", u64(136), 42},
		{"create@144", u64(144), uint64(sb.CreateTime)},
		{"update@152", u64(152), uint64(sb.UpdateTime)},
		{"role 2 state@320", uint64(u32(256 + 2*32)), uint64(RoleRebuilding)},
		{"role 2 recovery@328", u64(256 + 2*32 + 8), 123456},
		{"role 4 state@384", uint64(u32(256 + 4*32)), uint64(RoleSpare)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if string(b[:8]) != "ublkraid" {
		t.Errorf("magic = %q", b[:8])
	}
	if !bytes.Equal(b[40:56], sb.ArrayUUID[:]) || !bytes.Equal(b[56:72], sb.MemberUUID[:]) {
		t.Error("UUIDs not at 40 and 56")
	}
	if want := append([]byte(sb.Name), make([]byte, 32-len(sb.Name))...); !bytes.Equal(b[72:104], want) {
		t.Errorf("name@72 = %q", b[72:104])
	}
	if m := sbUUID(0xc2); !bytes.Equal(b[256+2*32+16:256+3*32], m[:]) {
		t.Error("role 2 member UUID not at 352")
	}
	// The checksum is CRC-32C of the block with the field zeroed.
	c := append([]byte(nil), b...)
	copy(c[12:16], []byte{0, 0, 0, 0})
	if got, want := u32(12), sbCRC32C(c); got != want {
		t.Errorf("checksum@12 = %#x, want %#x", got, want)
	}
}

// sbCRC32C is an independent bitwise CRC-32C.
func sbCRC32C(b []byte) uint32 {
	c := ^uint32(0)
	for _, x := range b {
		c ^= uint32(x)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0x82f63b78
			} else {
				c >>= 1
			}
		}
	}
	return ^c
}

func TestParseSuperblockRejects(t *testing.T) {
	le := binary.LittleEndian
	for _, tc := range []struct {
		name string
		sb   func(*Superblock)       // change the value, then encode without validating
		raw  func(b []byte)          // change the encoded bytes, then reseal the checksum
		bad  func(b []byte)          // change the encoded bytes after sealing
		want string                  // in the error message
		is   []error                 // besides ErrCorruptSuperblock
		none bool                    // ErrNoSuperblock instead
		buf  func(b []byte) []byte   // replace the buffer
		chk  func(*testing.T, error) // extra checks
	}{
		{name: "zeroed device", buf: func([]byte) []byte { return make([]byte, SuperblockSize) }, none: true},
		{name: "foreign device", buf: func([]byte) []byte { return bytes.Repeat([]byte("XFSB"), SuperblockSize/4) }, none: true},
		{name: "magic case", raw: func(b []byte) { copy(b, "UBLKRAID") }, none: true},
		{name: "bad checksum", bad: func(b []byte) { b[2000] ^= 1 }, want: "checksum mismatch", is: []error{ErrBadChecksum}},
		{name: "bad checksum field", bad: func(b []byte) { b[offChecksum] ^= 0x80 }, want: "checksum mismatch", is: []error{ErrBadChecksum}},
		{name: "version 0", raw: func(b []byte) { le.PutUint32(b[8:], 0) }, want: "unknown format version 0", is: []error{ErrUnknownVersion}},
		{name: "version 2", bad: func(b []byte) { le.PutUint32(b[8:], 2) }, want: "unknown format version 2", is: []error{ErrUnknownVersion}},
		{name: "unknown flags", raw: func(b []byte) { b[offFlags] |= 4 }, want: "unknown flags 0x4"},
		{name: "reserved header", raw: func(b []byte) { b[200] = 1 }, want: "reserved byte 200"},
		{name: "reserved tail", raw: func(b []byte) { b[4095] = 1 }, want: "reserved byte 4095"},
		{name: "reserved role entry", raw: func(b []byte) { b[offRoles+3*32+5] = 1 }, want: "entry 3: reserved"},
		{name: "zero array UUID", sb: func(sb *Superblock) { sb.ArrayUUID = [16]byte{} }, want: "array UUID is zero"},
		{name: "zero member UUID", sb: func(sb *Superblock) { sb.MemberUUID = [16]byte{} }, want: "member UUID is zero"},
		{name: "no members", sb: func(sb *Superblock) { sb.Members = 0 }, want: "member count 0"},
		{name: "65 members", sb: func(sb *Superblock) { sb.Members = 65 }, want: "member count 65"},
		{name: "level 4", sb: func(sb *Superblock) { sb.Level = 4; sb.Layout = 0 }, want: "RAID level 4 is not 0, 1, 5, 6 or 10"},
		{name: "level 7", sb: func(sb *Superblock) { sb.Level = 7; sb.Layout = 0 }, want: "RAID level 7"},
		{name: "raid5 layout 4", sb: func(sb *Superblock) { sb.Level, sb.Layout = 5, 4 }, want: "RAID 5 layout 0x4 is not one of md's four"},
		{name: "raid6 layout 0x102", sb: func(sb *Superblock) { sb.Level = 6 }, want: "RAID 6 layout 0x102"},
		{name: "raid6 md restart layout", sb: func(sb *Superblock) { sb.Level, sb.Layout = 6, 16 }, want: "RAID 6 layout 0x10"},
		{name: "raid5 layout huge", sb: func(sb *Superblock) { sb.Level, sb.Layout = 5, math.MaxUint32 }, want: "RAID 5 layout 0xffffffff"},
		{name: "raid5 chunk zero", sb: func(sb *Superblock) { sb.Level, sb.Layout, sb.ChunkSectors = 5, 2, 0 }, want: "chunk of 0 sectors"},
		{name: "raid5 two members", sb: func(sb *Superblock) {
			sb.Level, sb.Layout, sb.Members = 5, 2, 2
			sb.Roles[2], sb.Roles[3] = RoleEntry{State: RoleSpare, Member: sbUUID(0xc2)}, RoleEntry{}
		}, want: "RAID 5 with 2 members: it needs at least 3"},
		{name: "raid6 three members", sb: func(sb *Superblock) {
			sb.Level, sb.Layout, sb.Members = 6, 2, 3
			sb.Roles[3] = RoleEntry{}
		}, want: "RAID 6 with 3 members: it needs at least 4"},
		{name: "raid1 layout", sb: func(sb *Superblock) { sb.Level = 1; sb.Layout = 0x102 }, want: "RAID 1 layout 0x102"},
		{name: "raid0 layout", sb: func(sb *Superblock) { sb.Level = 0; sb.Layout = 2 }, want: "RAID 0 layout 0x2"},
		{name: "raid10 one copy", sb: func(sb *Superblock) { sb.Layout = 0x101 }, want: "need at least 2 copies"},
		{name: "raid10 zero far", sb: func(sb *Superblock) { sb.Layout = 0x002 }, want: "need at least 2 copies"},
		{name: "raid10 layout version", sb: func(sb *Superblock) { sb.Layout = 0x20102 }, want: "layout version 1"},
		{name: "raid10 copies > members", sb: func(sb *Superblock) { sb.Layout = 0x105 }, want: "5 copies but only 4 members"},
		{name: "chunk not power of two", sb: func(sb *Superblock) { sb.ChunkSectors = 1000 }, want: "chunk of 1000 sectors is not a power of two"},
		{name: "chunk too small", sb: func(sb *Superblock) { sb.ChunkSectors = 4 }, want: "chunk of 4 sectors"},
		{name: "chunk zero raid10", sb: func(sb *Superblock) { sb.ChunkSectors = 0 }, want: "chunk of 0 sectors"},
		{name: "role out of range", sb: func(sb *Superblock) { sb.Role = 4 }, want: "role 4 is out of range (member count 4)"},
		{name: "role huge", sb: func(sb *Superblock) { sb.Role = SpareRole - 1 }, want: "out of range"},
		{name: "data offset unaligned", sb: func(sb *Superblock) { sb.DataOffset = 1<<20 + 4096 }, want: "data offset 1052672 is not a multiple of 1 MiB"},
		{name: "data offset zero", sb: func(sb *Superblock) { sb.DataOffset = 0; sb.BitmapBytes = 0; sb.BitmapOffset = 0 }, want: "data offset 0"},
		{name: "data offset inside superblock", sb: func(sb *Superblock) { sb.DataOffset = 4096; sb.BitmapBytes = 0; sb.BitmapOffset = 0 }, want: "data offset 4096"},
		{name: "no data", sb: func(sb *Superblock) { sb.DataSectors = 0 }, want: "data size of 0 sectors"},
		{name: "data not 4k", sb: func(sb *Superblock) { sb.DataSectors = 2000001 }, want: "data size of 2000001 sectors"},
		{name: "data overflows", sb: func(sb *Superblock) { sb.DataSectors = math.MaxUint64 / 512 &^ 7 }, want: "overflows"},
		{name: "bitmap overlaps data", sb: func(sb *Superblock) { sb.BitmapOffset = 2<<20 - 4096; sb.BitmapBytes = 8192 }, want: "overlaps the data"},
		{name: "bitmap at data", sb: func(sb *Superblock) { sb.BitmapOffset = 2 << 20 }, want: "overlaps the data"},
		{name: "bitmap huge", sb: func(sb *Superblock) { sb.BitmapBytes = math.MaxUint64 &^ 4095 }, want: "overlaps the data"},
		{name: "bitmap overlaps superblock", sb: func(sb *Superblock) { sb.BitmapOffset = 4096 }, want: "overlaps the superblock"},
		{name: "bitmap unaligned", sb: func(sb *Superblock) { sb.BitmapOffset = 8192 + 512 }, want: "not 4 KiB aligned"},
		{name: "bitmap size unaligned", sb: func(sb *Superblock) { sb.BitmapBytes = 1000 }, want: "not 4 KiB aligned"},
		{name: "bitmap offset without bitmap", sb: func(sb *Superblock) { sb.BitmapBytes = 0 }, want: "bitmap offset 8192 without a bitmap"},
		{name: "events zero", sb: func(sb *Superblock) { sb.Events = 0 }, want: "events is 0"},
		{name: "events would wrap", sb: func(sb *Superblock) { sb.Events = math.MaxUint64 }, want: "events 18446744073709551615 is past the maximum"},
		{name: "bitmap over 128 MiB", sb: func(sb *Superblock) { sb.DataOffset = 1 << 40; sb.BitmapBytes = MaxBitmapBytes + 4096 }, want: "bitmap area of 134221824 bytes is larger than the maximum"},
		{name: "name not NUL-padded", raw: func(b []byte) { copy(b[offName:offName+32], "ab\x00c"+strings.Repeat("\x00", 28)) }, want: "name is not NUL-padded"},
		{name: "name 32 bytes invalid UTF-8", raw: func(b []byte) { copy(b[offName:offName+32], strings.Repeat("é", 15)+"\xc3x") }, want: "not valid UTF-8"},
		{name: "name invalid UTF-8", raw: func(b []byte) { copy(b[offName:offName+32], "ab\xff"+strings.Repeat("\x00", 29)) }, want: "not valid UTF-8"},
		{name: "name control", sb: func(sb *Superblock) { sb.Name = "a\nb" }, want: `contains '\n'`},
		{name: "name slash", sb: func(sb *Superblock) { sb.Name = "a/b" }, want: `contains '/'`},
		{name: "role unused", sb: func(sb *Superblock) { sb.Roles[3] = RoleEntry{} }, want: "role 3 is unused in an array of 4 members"},
		{name: "unused entry not zero", sb: func(sb *Superblock) { sb.Roles[9].RecoveryOffset = 1 }, want: "unused role table entry 9 is not zero"},
		{name: "active past members", sb: func(sb *Superblock) { sb.Roles[5] = RoleEntry{State: RoleActive, Member: sbUUID(9)} }, want: "entry 5 is active, past the member count 4"},
		{name: "spare in range", sb: func(sb *Superblock) { sb.Roles[3] = RoleEntry{State: RoleSpare, Member: sbUUID(9)} }, want: "role 3 is spare"},
		{name: "unknown state", sb: func(sb *Superblock) { sb.Roles[0].State = 9 }, want: "entry 0 has unknown state 9"},
		{name: "recovery offset on active", sb: func(sb *Superblock) { sb.Roles[0].RecoveryOffset = 8 }, want: "entry 0 is active but has recovery offset 8"},
		{name: "recovery past data", sb: func(sb *Superblock) { sb.Roles[2].RecoveryOffset = 2000008 }, want: "recovery offset 2000008 is past the data size"},
		{name: "active without UUID", sb: func(sb *Superblock) { sb.Roles[0].Member = [16]byte{} }, want: "entry 0 is active without a member UUID"},
		{name: "spare without UUID", sb: func(sb *Superblock) { sb.Roles[4].Member = [16]byte{} }, want: "entry 4 is spare without a member UUID"},
		{name: "duplicate member in table", sb: func(sb *Superblock) { sb.Roles[4].Member = sbUUID(0xa0) }, want: "holds both role table entries 0 and 4"},
		{name: "own role names another", sb: func(sb *Superblock) { sb.Roles[1].Member = sbUUID(0xee) }, want: "role 1 does not name it"},
		{name: "own role missing", sb: func(sb *Superblock) { sb.Roles[1].State = RoleMissing }, want: "role 1 is marked missing"},
		{name: "spare named by a role", sb: func(sb *Superblock) { sb.Role = SpareRole }, want: "spare member b1b1b1b1-b1b1-b1b1-b1b1-b1b1b1b1b1b1 is named by role 1"},
		{name: "spare in raid0", sb: func(sb *Superblock) {
			sb.Level = 0
			sb.Layout = 0
			sb.Roles[2] = RoleEntry{State: RoleActive, Member: sbUUID(0xc2)}
		}, want: "spare in a RAID 0 array"},
		{name: "spare member in raid0", sb: func(sb *Superblock) {
			sb.Level, sb.Layout, sb.Role = 0, 0, SpareRole
			sb.Roles[1].Member, sb.Roles[2], sb.Roles[4] = sbUUID(0xb0), RoleEntry{State: RoleActive, Member: sbUUID(0xc2)}, RoleEntry{}
		}, want: "spare member in a RAID 0 array"},
		{name: "rebuilding in raid0", sb: func(sb *Superblock) { sb.Level = 0; sb.Layout = 0; sb.Roles[4] = RoleEntry{} }, want: "role 2 is rebuilding in a RAID 0 array"},
		{name: "short buffer", buf: func(b []byte) []byte { return b[:4095] }, want: "4095 bytes", chk: func(t *testing.T, err error) {
			if errors.Is(err, ErrCorruptSuperblock) || errors.Is(err, ErrNoSuperblock) {
				t.Errorf("short buffer error %v is a superblock verdict", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := sbFixture()
			if tc.sb != nil {
				tc.sb(sb)
				if _, err := sb.MarshalBinary(); !errors.Is(err, ErrInvalidSuperblock) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("MarshalBinary: %v, want ErrInvalidSuperblock: ...%s...", err, tc.want)
				}
			}
			b := sb.encode()
			if tc.raw != nil {
				tc.raw(b)
				seal(b)
			}
			if tc.bad != nil {
				tc.bad(b)
			}
			if tc.buf != nil {
				b = tc.buf(b)
			}
			got, err := ParseSuperblock(b)
			if err == nil {
				t.Fatalf("ParseSuperblock accepted %+v", got)
			}
			if got != nil {
				t.Errorf("ParseSuperblock returned a superblock with error %v", err)
			}
			if tc.chk != nil {
				tc.chk(t, err)
			} else if tc.none {
				if !errors.Is(err, ErrNoSuperblock) || errors.Is(err, ErrCorruptSuperblock) {
					t.Errorf("err = %v, want ErrNoSuperblock", err)
				}
			} else {
				if !errors.Is(err, ErrCorruptSuperblock) || errors.Is(err, ErrNoSuperblock) {
					t.Errorf("err = %v, want ErrCorruptSuperblock", err)
				}
				for _, e := range tc.is {
					if !errors.Is(err, e) {
						t.Errorf("err = %v, want errors.Is %v", err, e)
					}
				}
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseSuperblockAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		sb   func(*Superblock)
	}{
		{"fixture", func(*Superblock) {}},
		{"name of 32 bytes", func(sb *Superblock) { sb.Name = strings.Repeat("ü", 16) }},
		{"empty name", func(sb *Superblock) { sb.Name = "" }},
		{"no bitmap", func(sb *Superblock) { sb.BitmapBytes, sb.BitmapOffset = 0, 0 }},
		{"bitmap fills the reserve", func(sb *Superblock) { sb.BitmapOffset, sb.BitmapBytes = 8192, 2<<20-8192 }},
		{"largest bitmap", func(sb *Superblock) { sb.DataOffset, sb.BitmapBytes = 1<<40, MaxBitmapBytes }},
		{"largest events", func(sb *Superblock) { sb.Events = MaxEvents }},
		{"spare", func(sb *Superblock) {
			sb.Role = SpareRole
			sb.MemberUUID = sbUUID(0xd3)
			sb.Roles[1].State = RoleFaulty
		}},
		{"spare not in the table", func(sb *Superblock) { sb.Role = SpareRole; sb.MemberUUID = sbUUID(0xe4) }},
		{"missing with last holder", func(sb *Superblock) { sb.Roles[3].Member = sbUUID(0xf5) }},
		{"own role faulty", func(sb *Superblock) { sb.Roles[1].State = RoleFaulty }},
		{"own role rebuilding at end", func(sb *Superblock) {
			sb.Roles[1] = RoleEntry{State: RoleRebuilding, RecoveryOffset: 2000000, Member: sbUUID(0xb1)}
		}},
		{"raid1 no chunk", func(sb *Superblock) { sb.Level, sb.Layout, sb.ChunkSectors = 1, 0, 0 }},
		{"raid0 one member", func(sb *Superblock) {
			sb.Level, sb.Layout, sb.Members, sb.Role = 0, 0, 1, 0
			sb.Roles = [RoleTableSize]RoleEntry{{State: RoleActive, Member: sb.MemberUUID}}
		}},
		{"raid10 o3", func(sb *Superblock) { sb.Layout = 0x10301 }},
		{"raid5 left-asymmetric", func(sb *Superblock) { sb.Level, sb.Layout = 5, 0 }},
		{"raid5 right-symmetric", func(sb *Superblock) { sb.Level, sb.Layout = 5, 3 }},
		{"raid5 three members", func(sb *Superblock) {
			sb.Level, sb.Layout, sb.Members = 5, 2, 3
			sb.Roles[3] = RoleEntry{}
		}},
		{"raid6 left-symmetric", func(sb *Superblock) { sb.Level, sb.Layout = 6, 2 }},
		{"raid6 right-asymmetric smallest chunk", func(sb *Superblock) { sb.Level, sb.Layout, sb.ChunkSectors = 6, 1, 8 }},
		{"64 members", func(sb *Superblock) {
			sb.Members = 64
			for i := 4; i < 64; i++ {
				sb.Roles[i] = RoleEntry{State: RoleActive, Member: sbUUID(byte(i))}
			}
		}},
		{"negative times", func(sb *Superblock) { sb.CreateTime, sb.UpdateTime = -1, math.MinInt64 }},
		{"max chunk", func(sb *Superblock) { sb.ChunkSectors = 1 << 31 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := sbFixture()
			tc.sb(sb)
			b := mustMarshal(t, sb)
			got, err := ParseSuperblock(append(b, 0xff)) // longer buffers are fine
			if err != nil {
				t.Fatal(err)
			}
			if *got != *sb {
				t.Errorf("round trip: got %+v, want %+v", got, sb)
			}
		})
	}
}

func TestSuperblockReserve(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		member, bitmap, want uint64
	}{
		{0, 0, MiB},
		{64 * MiB, 0, MiB},    // 64 KiB headroom
		{64 * MiB, 4096, MiB}, // bitmap fits in the first MiB
		{64 * MiB, MiB - 8192 - 64<<10 - 4096, MiB},         // exactly (with the shadow superblock)
		{64 * MiB, MiB - 8192 - 64<<10 - 4096 + 1, 2 * MiB}, // rounded to 4 KiB: one page too many
		{1 << 30, 0, 2 * MiB},                               // 1 MiB headroom
		{1<<30 - 1, 0, MiB},                                 // 512 KiB headroom
		{1 << 40, 0, 129 * MiB},                             // 128 MiB headroom (capped)
		{1 << 50, 32 * MiB, 161 * MiB},                      // capped
		{3 << 20, 1 << 62, 1<<62 + MiB},                     // big bitmap
		{0, math.MaxUint64, math.MaxUint64 &^ (MiB - 1)},    // saturates
	} {
		if got := Reserve(tc.member, tc.bitmap); got != tc.want {
			t.Errorf("Reserve(%d, %d) = %d (%d MiB), want %d", tc.member, tc.bitmap, got, got/MiB, tc.want)
		}
	}
}

func TestSuperblockCheckMemberSize(t *testing.T) {
	sb := sbFixture()
	end := sb.DataOffset + sb.DataSectors*512
	if err := sb.CheckMemberSize(end); err != nil {
		t.Errorf("exact size: %v", err)
	}
	if err := sb.CheckMemberSize(end - 1); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("one byte short: %v", err)
	}
}

// Item 5 of "Operator safety": every offset of a valid superblock is
// bounded by the member it came from, and the error names the field.
func TestCheckMemberSizeBoundsEveryField(t *testing.T) {
	const member = 512 << 20 // the VM's 512 MiB disks
	for _, tc := range []struct {
		name string
		sb   func(*Superblock)
		want string // "" accepts
	}{
		{"fits", func(sb *Superblock) { sb.DataSectors = (member - sb.DataOffset) / 512 }, ""},
		{"data sectors 2^30", func(sb *Superblock) { sb.DataSectors = 1 << 30 }, "data size of 1073741824 sectors from data offset 2097152 ends at byte 549757911040, past the member's end (536870912 bytes; room for 1044480 sectors)"},
		{"data one sector long", func(sb *Superblock) { sb.DataSectors = (member-sb.DataOffset)/512 + 8 }, "past the member's end"},
		{"data offset 1 TiB", func(sb *Superblock) { sb.DataOffset, sb.DataSectors = 1<<40, 1<<20 }, "data offset 1099511627776 is past the member's end (536870912 bytes)"},
		{"data offset at the end", func(sb *Superblock) { sb.DataOffset, sb.DataSectors = member, 1<<20 }, "data offset 536870912 is past the member's end"},
		{"bitmap past the end", func(sb *Superblock) { sb.DataOffset, sb.BitmapOffset = 1<<40, 1<<39 }, "bitmap area at byte 549755813888, 65536 bytes, ends past the member's end"},
		{"member smaller than the superblock", func(sb *Superblock) {}, "too small to hold the superblock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := sbFixture()
			tc.sb(sb)
			if err := sb.Validate(); err != nil {
				t.Fatalf("the crafted superblock must be valid in itself: %v", err)
			}
			size := uint64(member)
			if tc.name == "member smaller than the superblock" {
				size = 4096
			}
			err := sb.CheckMemberSize(size)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			case tc.want != "" && !errors.Is(err, ErrCorruptSuperblock):
				t.Errorf("err = %v does not wrap ErrCorruptSuperblock", err)
			}
		})
	}
}

// A crafted events counter of 2^64-1 would wrap to 0 at the next update:
// it is corrupt; 2^64-2 is the last valid value.
func TestSuperblockEventsWrap(t *testing.T) {
	sb := sbFixture()
	sb.Events = MaxEvents
	b := mustMarshal(t, sb)
	if got, err := ParseSuperblock(b); err != nil || got.Events != MaxEvents {
		t.Fatalf("events MaxEvents: %v", err)
	}
	binary.LittleEndian.PutUint64(b[offEvents:], math.MaxUint64)
	seal(b)
	if _, err := ParseSuperblock(b); !errors.Is(err, ErrCorruptSuperblock) || !strings.Contains(err.Error(), "would wrap") {
		t.Fatalf("events 2^64-1: err = %v", err)
	}
}

func TestSuperblockUUIDString(t *testing.T) {
	u := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x4d, 0xef, 0x80, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0xff}
	if got, want := UUIDString(u), "12345678-9abc-4def-8001-0203040506ff"; got != want {
		t.Errorf("UUIDString = %q, want %q", got, want)
	}
}

// sbGen generates valid superblocks, covering every field.
func sbGen() *rapid.Generator[*Superblock] {
	return rapid.Custom(func(t *rapid.T) *Superblock {
		sb := &Superblock{}
		sb.Level = rapid.SampledFrom([]uint32{0, 1, 10}).Draw(t, "level")
		copies := 1
		switch sb.Level {
		case 10:
			near := rapid.IntRange(1, 8).Draw(t, "near")
			far := rapid.IntRange(1, 8).Filter(func(f int) bool { return near*f >= 2 }).Draw(t, "far")
			copies = near * far
			sb.Layout = uint32(near) | uint32(far)<<8
			if rapid.Bool().Draw(t, "offset") {
				sb.Layout |= 1 << 16
			}
			sb.ChunkSectors = 1 << rapid.IntRange(3, 31).Draw(t, "chunkShift")
		case 1:
			if rapid.Bool().Draw(t, "chunk") {
				sb.ChunkSectors = 1 << rapid.IntRange(3, 31).Draw(t, "chunkShift")
			}
		case 0:
			sb.ChunkSectors = 1 << rapid.IntRange(3, 31).Draw(t, "chunkShift")
		}
		sb.Members = uint32(rapid.IntRange(max(copies, 1), RoleTableSize).Draw(t, "members"))
		sb.ArrayUUID = sbGenUUID().Draw(t, "array")
		sb.Name = sbGenName().Draw(t, "name")
		sb.DataOffset = uint64(rapid.IntRange(1, 1<<20).Draw(t, "dataMiB")) << 20
		sb.DataSectors = 8 * rapid.Uint64Range(1, (math.MaxUint64-sb.DataOffset)/512/8).Draw(t, "data4k")
		if rapid.Bool().Draw(t, "bitmap") {
			pages := (sb.DataOffset - 8192) / 4096
			first := rapid.Uint64Range(2, pages+1).Draw(t, "bitmapPage")
			sb.BitmapOffset = first * 4096
			sb.BitmapBytes = 4096 * rapid.Uint64Range(1, min(pages+2-first, MaxBitmapBytes/4096)).Draw(t, "bitmapPages")
		}
		sb.Events = rapid.Uint64Range(1, MaxEvents).Draw(t, "events")
		sb.Clean = rapid.Bool().Draw(t, "clean")
		sb.CreateTime = rapid.Int64().Draw(t, "create")
		sb.UpdateTime = rapid.Int64().Draw(t, "update")

		// Distinct member UUIDs: random, with the entry index in the
		// last byte.
		uuid := func(i int) [16]byte {
			u := sbGenUUID().Draw(t, "member")
			u[15] = byte(i)
			u[14] |= 1
			return u
		}
		spare := sb.Level != 0 && rapid.Bool().Draw(t, "spare")
		if spare {
			sb.Role = SpareRole
		} else {
			sb.Role = uint32(rapid.IntRange(0, int(sb.Members)-1).Draw(t, "role"))
		}
		states := []RoleState{RoleActive, RoleFaulty, RoleRebuilding, RoleMissing}
		if sb.Level == 0 {
			states = []RoleState{RoleActive, RoleFaulty, RoleMissing}
		}
		for i := range int(sb.Members) {
			e := &sb.Roles[i]
			e.State = rapid.SampledFrom(states).Draw(t, "state")
			if i == int(sb.Role) && e.State == RoleMissing {
				e.State = RoleActive
			}
			if e.State == RoleRebuilding {
				e.RecoveryOffset = rapid.Uint64Range(0, sb.DataSectors).Draw(t, "recovery")
			}
			if e.State != RoleMissing || rapid.Bool().Draw(t, "lastHolder") {
				e.Member = uuid(i)
			}
		}
		if sb.Level != 0 {
			for i := int(sb.Members); i < RoleTableSize; i++ {
				if rapid.IntRange(0, 3).Draw(t, "spareEntry") == 0 {
					sb.Roles[i] = RoleEntry{State: RoleSpare, Member: uuid(i)}
				}
			}
		}
		switch {
		case !spare:
			sb.MemberUUID = sb.Roles[sb.Role].Member
		case sb.Members == RoleTableSize || rapid.Bool().Draw(t, "spareUnlisted"):
			sb.MemberUUID = uuid(RoleTableSize) // not in the table
		default:
			sb.MemberUUID = uuid(int(sb.Members))
			sb.Roles[sb.Members] = RoleEntry{State: RoleSpare, Member: sb.MemberUUID}
		}
		return sb
	})
}

func sbGenUUID() *rapid.Generator[[16]byte] {
	return rapid.Custom(func(t *rapid.T) (u [16]byte) {
		copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "bytes"))
		u[0] |= 1 // not zero
		return u
	})
}

func sbGenName() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		runes := rapid.SliceOfN(rapid.SampledFrom([]rune("az09-_.: éü日本🙂")), 0, 32).Draw(t, "runes")
		var s []byte
		for _, r := range runes {
			if len(s)+utf8.RuneLen(r) > ArrayNameMax {
				break
			}
			s = utf8.AppendRune(s, r)
		}
		return string(s)
	})
}

func TestSuperblockRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sb := sbGen().Draw(t, "sb")
		b, err := sb.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary(%+v): %v", sb, err)
		}
		if len(b) != SuperblockSize {
			t.Fatalf("len %d", len(b))
		}
		got, err := ParseSuperblock(b)
		if err != nil {
			t.Fatalf("ParseSuperblock: %v", err)
		}
		if *got != *sb {
			t.Fatalf("Parse(Marshal(sb)) = %+v, want %+v", got, sb)
		}
		if b2 := mustMarshal(t, got); !bytes.Equal(b, b2) {
			t.Fatal("Marshal(Parse(b)) != b")
		}
	})
}

// TestSuperblockByteFlip: any single damaged byte makes ParseSuperblock
// fail; it never returns a different superblock.
func TestSuperblockByteFlip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sb := sbGen().Draw(t, "sb")
		b := mustMarshal(t, sb)
		i := rapid.IntRange(0, SuperblockSize-1).Draw(t, "offset")
		b[i] ^= rapid.Byte().Filter(func(x byte) bool { return x != 0 }).Draw(t, "xor")
		got, err := ParseSuperblock(b)
		if err == nil {
			t.Fatalf("byte %d damaged, parsed as %+v", i, got)
		}
		if !errors.Is(err, ErrCorruptSuperblock) && !(i < 8 && errors.Is(err, ErrNoSuperblock)) {
			t.Fatalf("byte %d damaged: %v", i, err)
		}
	})
}
