package bitmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
	TiB = 1 << 40
)

func TestDefaultRegionSectors(t *testing.T) {
	for _, tc := range []struct {
		array, region uint64
	}{
		{1 * MiB, 4 * MiB},
		{1 * GiB, 4 * MiB},
		{256 * GiB, 4 * MiB},
		{256*GiB + 512, 8 * MiB},
		{512 * GiB, 8 * MiB},
		{1 * TiB, 16 * MiB},
		{4 * TiB, 64 * MiB},
		{16 * TiB, 256 * MiB},
		{64 * TiB, 1 * GiB},
		{1 << 60, 1 << 44},
	} {
		got := DefaultRegionSectors(tc.array/SectorSize) * SectorSize
		if got != tc.region {
			t.Errorf("DefaultRegionSectors(%s) = %s, want %s", sizeString(tc.array), sizeString(got), sizeString(tc.region))
		}
	}
}

// The default layout of a 16 TiB array fits in 72 KiB with 4 KiB blocks,
// and AreaBytesFor's answer is what Layout accepts.
func TestAreaBytesFor(t *testing.T) {
	for _, size := range []uint64{GiB, 100 * GiB, TiB, 16 * TiB, 1 << 50} {
		cfg := Config{ArrayUUID: testUUID, ArraySectors: size / SectorSize, BlockSize: 4096, AreaOffset: 8192, Events: 1}
		n, err := AreaBytesFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n > 72*KiB {
			t.Errorf("%s: area of %d bytes, want <= 72 KiB", sizeString(size), n)
		}
		cfg.AreaBytes = n
		hb, db, err := Layout(cfg)
		if err != nil || hb != 1 || db < 1 {
			t.Errorf("%s: Layout = %d, %d, %v", sizeString(size), hb, db, err)
		}
		cfg.AreaBytes = n - 4096
		if _, _, err := Layout(cfg); err == nil {
			t.Errorf("%s: Layout fits in %d bytes, less than AreaBytesFor's %d", sizeString(size), cfg.AreaBytes, n)
		}
	}
	// A 64 KiB block size at offset 8192: the copy starts at 64 KiB.
	cfg := Config{ArrayUUID: testUUID, ArraySectors: GiB / SectorSize, BlockSize: 64 * KiB, AreaOffset: 8192, AreaBytes: 1 * MiB, Events: 1}
	g, err := NewGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if g.Start != 64*KiB || g.BlockOffset(1) != 128*KiB || g.UsedBytes() != 128*KiB-8192+64*KiB {
		t.Errorf("geometry %+v", g)
	}
}

func TestLayoutErrors(t *testing.T) {
	base := Config{ArrayUUID: testUUID, ArraySectors: TiB / SectorSize, BlockSize: 4096, AreaOffset: 8192, AreaBytes: 64 * KiB, Events: 1}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"region not power of two", func(c *Config) { c.RegionSectors = 3 << 11 }, "region size of 6144 sectors (3 MiB) is not a power of two"},
		{"region too small", func(c *Config) { c.RegionSectors = 64 }, "region size of 64 sectors (32 KiB) is too small: the minimum is 64 KiB"},
		{"regions do not fit", func(c *Config) { c.RegionSectors = 8192 }, "region size 4 MiB does not fit: 262144 regions of 4 MiB"},
		{"suggests the size that fits", func(c *Config) { c.RegionSectors = 8192 }, "the smallest region size that fits is 32 MiB (65536 sectors)"},
		{"too many regions", func(c *Config) { c.RegionSectors = 128; c.AreaBytes = 1 << 40 }, "more than the maximum of 1048576 regions"},
		{"area too small for anything", func(c *Config) { c.AreaBytes = 4096 }, "no region size fits: the area must hold at least 2 blocks of 4096 bytes"},
		{"block size not power of two", func(c *Config) { c.BlockSize = 3000 }, "bitmap block size 3000 is not a power of two"},
		{"block size too small", func(c *Config) { c.BlockSize = 256 }, "bitmap block size 256"},
		{"block size too large", func(c *Config) { c.BlockSize = 2 * MiB }, "bitmap block size 2097152"},
		{"empty array", func(c *Config) { c.ArraySectors = 0 }, "array size is 0 sectors"},
		{"unaligned area", func(c *Config) { c.AreaOffset = 8000 }, "bitmap area offset 8000 is not a multiple of 512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			_, _, err := Layout(cfg)
			if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Layout error %v, want one containing %q", err, tc.want)
			}
			if _, err := Create(cfg, InitNeverWritten, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The suggested size does fit.
	cfg := base
	cfg.RegionSectors = 65536
	if _, _, err := Layout(cfg); err != nil {
		t.Fatalf("suggested region size: %v", err)
	}
}

func TestBlockSizeFor(t *testing.T) {
	for _, tc := range []struct {
		l, p, o uint32
		want    int
	}{
		{512, 512, 0, 4096},
		{512, 4096, 0, 4096},
		{4096, 4096, 131072, 131072},
		{512, 4096, 786432, 4096}, // io_opt not a power of two: ignored
		{512, 512, 8 * MiB, 4096}, // larger than MaxBlockSize: ignored
		{8192, 8192, 0, 8192},
		{512, 16384, 65536, 65536},
	} {
		if got := BlockSizeFor(tc.l, tc.p, tc.o); got != tc.want {
			t.Errorf("BlockSizeFor(%d, %d, %d) = %d, want %d", tc.l, tc.p, tc.o, got, tc.want)
		}
	}
}

// The header's fields are where the format comment says.
func TestHeaderLayout(t *testing.T) {
	cfg := testConfig(t, 5000, 4096)
	g, err := NewGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4096)
	EncodeHeader(b, &g, 42, 40)
	le := binary.LittleEndian
	if string(b[:8]) != "ublkbmap" || le.Uint32(b[8:]) != 2 || le.Uint64(b[84:]) != 40 || le.Uint32(b[16:]) != 0 || le.Uint32(b[20:]) != 4096 ||
		le.Uint32(b[24:]) != 1 || le.Uint32(b[28:]) != 2 || !bytes.Equal(b[32:48], testUUID[:]) || le.Uint64(b[48:]) != 42 ||
		le.Uint64(b[56:]) != 128 || le.Uint64(b[64:]) != 5000 || le.Uint64(b[72:]) != 5000*128 || le.Uint32(b[80:]) != 4080 {
		t.Fatalf("header fields misplaced:\n% x", b[:96])
	}
	h, err := DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{Version: 2, BlockSize: 4096, DataBlocks: 2, ArrayUUID: testUUID, Events: 42, EventsCleared: 40, RegionSectors: 128, Regions: 5000, ArraySectors: 640000}
	if h != want {
		t.Fatalf("decoded %+v, want %+v", h, want)
	}
	// Any single corrupted byte is caught.
	for i := range 4096 {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := DecodeHeader(c); err == nil {
			t.Fatalf("byte %d corrupted: header still decodes", i)
		}
	}
	// Data block trailer.
	image := make([]byte, g.Regions)
	image[4079], image[4080], image[4999] = 2, 1, 2
	d := make([]byte, 4096)
	EncodeBlock(d, &g, 2, 77, image)
	if d[0] != 1 || d[919] != 2 || d[920] != 0 || le.Uint64(d[4080:]) != 77 || le.Uint32(d[4088:]) != 2 {
		t.Fatalf("data block fields misplaced")
	}
	states, seq, err := DecodeBlock(d, &g, 2)
	if err != nil || seq != 77 || len(states) != 920 || !bytes.Equal(states, image[4080:]) {
		t.Fatalf("DecodeBlock = %d states, seq %d, %v", len(states), seq, err)
	}
	if _, _, err := DecodeBlock(d, &g, 1); err == nil || !strings.Contains(err.Error(), "misplaced") {
		t.Fatalf("block decoded at the wrong index: %v", err)
	}
	other := g
	other.ArrayUUID[0] ^= 1
	if _, _, err := DecodeBlock(d, &other, 2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("block of another array decoded: %v", err)
	}
}

// A torn block write (any mix of old and new 512-byte sectors that is
// neither) fails its checksum.
func TestTornBlockDetected(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bs := rapid.SampledFrom([]int{1024, 4096, 8192}).Draw(t, "bs")
		cfg := testConfig(t, 3*bs, bs)
		g, err := NewGeometry(cfg)
		if err != nil {
			t.Fatal(err)
		}
		blk := rapid.IntRange(1, g.DataBlocks).Draw(t, "block")
		img := func(label string) []byte {
			im := rapid.SliceOfN(rapid.SampledFrom([]byte{0, 1, 2}), g.Regions, g.Regions).Draw(t, label)
			return im
		}
		oldIm, newIm := img("old"), img("new")
		oldB, newB := make([]byte, bs), make([]byte, bs)
		seq := rapid.Uint64().Draw(t, "seq")
		EncodeBlock(oldB, &g, blk, seq, oldIm)
		EncodeBlock(newB, &g, blk, seq+1, newIm)
		sectors := bs / SectorSize
		mix := rapid.SliceOfN(rapid.Bool(), sectors, sectors).Draw(t, "newSectors")
		torn := bytes.Clone(oldB)
		for i, n := range mix {
			if n {
				copy(torn[i*SectorSize:(i+1)*SectorSize], newB[i*SectorSize:])
			}
		}
		_, _, err = DecodeBlock(torn, &g, blk)
		if (err == nil) != (bytes.Equal(torn, oldB) || bytes.Equal(torn, newB)) {
			t.Fatalf("torn block (new sectors %v): decode error %v", mix, err)
		}
	})
}

func TestExamine(t *testing.T) {
	b, a := newTestBitmap(t, 3000, 1024, 1, InitNeverWritten, Options{})
	for _, r := range []int{0, 1500, 2999} {
		b.StartWrite(r, r, 1)
	}
	a.flush(t, b)
	s, err := Examine(a.areas[0], a.cfg.AreaOffset)
	if err != nil {
		t.Fatal(err)
	}
	if s.Header.Regions != 3000 || s.Dirty != 3 || s.Clean != 0 || s.NeverWritten != 2997 || len(s.BadBlocks) != 0 || s.Seq == 0 {
		t.Fatalf("summary %+v", s)
	}
	a.areas[0][s.Geometry.BlockOffset(2)-a.cfg.AreaOffset+5] ^= 1
	s, err = Examine(a.areas[0], a.cfg.AreaOffset)
	if err != nil || len(s.BadBlocks) != 1 || s.BadBlocks[0].Block != 2 || s.Dirty != 2 {
		t.Fatalf("summary %+v, %v", s, err)
	}
	if _, err := Examine(make([]byte, 8192), 8192); !errors.Is(err, ErrNoBitmap) {
		t.Fatalf("zeroed area: %v", err)
	}
}

func TestSizeString(t *testing.T) {
	for n, want := range map[uint64]string{512: "512 B", 64 * KiB: "64 KiB", 3 * MiB: "3 MiB", 1536 * MiB: "1.5 GiB", 1 << 60: "1 EiB"} {
		if got := sizeString(n); got != want {
			t.Errorf("sizeString(%d) = %q, want %q", n, got, want)
		}
	}
}

// A header whose events are 2^64-1 would make the next generation wrap to
// 0: it is corrupt (item 9 of "Operator safety"); 2^64-2 decodes.
func TestHeaderEventsWrap(t *testing.T) {
	cfg := testConfig(t, 5000, 4096)
	g, err := NewGeometry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4096)
	EncodeHeader(b, &g, math.MaxUint64-1, 1)
	if h, err := DecodeHeader(b); err != nil || h.Events != math.MaxUint64-1 {
		t.Fatalf("events 2^64-2: %+v, %v", h, err)
	}
	EncodeHeader(b, &g, math.MaxUint64, 1)
	if _, err := DecodeHeader(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "would wrap") {
		t.Fatalf("events 2^64-1: err = %v", err)
	}
}

// MaxCopyBytes, what assembly reads of an area, holds every valid copy:
// the most regions at every block size, at every alignment of the area.
func TestMaxCopyBytesBoundsEveryLayout(t *testing.T) {
	var most uint64
	for bs := MinBlockSize; bs <= MaxBlockSize; bs <<= 1 {
		for _, off := range []uint64{8192, 8192 + 512, uint64(bs) + 512, 1 << 20} {
			cfg := Config{ArrayUUID: testUUID, ArraySectors: MaxRegions * MinRegionSectors, RegionSectors: MinRegionSectors,
				BlockSize: bs, AreaOffset: off, AreaBytes: math.MaxUint64}
			g, err := NewGeometry(cfg)
			if err != nil {
				t.Fatalf("block size %d at %d: %v", bs, off, err)
			}
			most = max(most, g.UsedBytes())
		}
	}
	if most > MaxCopyBytes || MaxCopyBytes%MaxBlockSize != 0 || MaxCopyBytes > 8*MiB {
		t.Fatalf("MaxCopyBytes %d: the largest copy spans %d", MaxCopyBytes, most)
	}
}
