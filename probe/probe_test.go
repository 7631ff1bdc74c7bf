package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/probe/probetest"
)

// strictReader is a device of size bytes held in memory (sparse: only
// written blocks exist) that fails any read outside [0, size).
type strictReader struct {
	size  int64
	data  map[int64]byte
	reads int
}

func newDevice(size int64) *strictReader { return &strictReader{size: size, data: map[int64]byte{}} }

func (r *strictReader) write(off int64, b []byte) {
	for i, c := range b {
		r.data[off+int64(i)] = c
	}
}

func (r *strictReader) ReadAt(p []byte, off int64) (int, error) {
	r.reads++
	if off < 0 || off+int64(len(p)) > r.size {
		return 0, fmt.Errorf("read of %d bytes at %d outside a %d-byte device", len(p), off, r.size)
	}
	for i := range p {
		p[i] = r.data[off+int64(i)]
	}
	return len(p), nil
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

// Fixtures: each writes one kind of signature the way its tool lays it
// out, on a device of size bytes.
type fixture struct {
	name  string
	size  int64
	write func(d *strictReader)
	want  string // the Type found
}

const mib = 1 << 20

func fixtures() []fixture {
	ext := func(compat, incompat, ro uint32) func(d *strictReader) {
		return func(d *strictReader) {
			d.write(1024+0x18, le32(2)) // 4 KiB blocks
			d.write(1024+0x38, le16(0xEF53))
			d.write(1024+0x5c, le32(compat))
			d.write(1024+0x60, le32(incompat))
			d.write(1024+0x64, le32(ro))
		}
	}
	md1 := func(off int64) func(d *strictReader) {
		return func(d *strictReader) { d.write(off, le32(0xa92b4efc)); d.write(off+4, le32(1)) }
	}
	size := int64(64*mib + 7*512) // not 64 KiB aligned: the end-of-device offsets are rounded
	return []fixture{
		{"ext2", size, ext(0, 0x2, 0x3), "ext2 filesystem"},
		{"ext3", size, ext(0x4|0x38, 0x2, 0x3), "ext3 filesystem"},
		{"ext4", size, ext(0x3c, 0x2c2, 0x46b), "ext4 filesystem"},
		{"xfs", size, func(d *strictReader) { d.write(0, []byte("XFSB")) }, "xfs filesystem"},
		{"btrfs", size, func(d *strictReader) { d.write(65536+64, []byte("_BHRfS_M")) }, "btrfs filesystem"},
		{"vfat32", size, func(d *strictReader) {
			d.write(11, le16(512))
			d.write(13, []byte{8})
			d.write(82, []byte("FAT32   "))
			d.write(510, []byte{0x55, 0xaa})
		}, "vfat filesystem"},
		{"vfat16", size, func(d *strictReader) {
			d.write(11, le16(4096))
			d.write(13, []byte{4})
			d.write(54, []byte("FAT16   "))
			d.write(510, []byte{0x55, 0xaa})
		}, "vfat filesystem"},
		{"exfat", size, func(d *strictReader) { d.write(3, []byte("EXFAT   ")); d.write(510, []byte{0x55, 0xaa}) }, "exfat filesystem"},
		{"ntfs", size, func(d *strictReader) { d.write(3, []byte("NTFS    ")); d.write(510, []byte{0x55, 0xaa}) }, "ntfs filesystem"},
		{"swap4k", size, func(d *strictReader) { d.write(4096-10, []byte("SWAPSPACE2")) }, "swap space"},
		{"swap32k", size, func(d *strictReader) { d.write(32768-10, []byte("SWAPSPACE2")) }, "swap space"},
		{"swap64k", size, func(d *strictReader) { d.write(65536-10, []byte("SWAPSPACE2")) }, "swap space"},
		{"mbr", size, func(d *strictReader) {
			d.write(446, []byte{0x80, 0, 0, 0, 0x83})
			d.write(510, []byte{0x55, 0xaa})
		}, "MBR partition table"},
		{"gpt", size, func(d *strictReader) {
			d.write(446, []byte{0, 0, 0, 0, 0xee})
			d.write(510, []byte{0x55, 0xaa})
			d.write(512, []byte("EFI PART"))
		}, "GPT partition table"},
		{"gpt4k", size, func(d *strictReader) { d.write(4096, []byte("EFI PART")) }, "GPT partition table"},
		{"gpt-backup", size, func(d *strictReader) { d.write(size-512, []byte("EFI PART")) }, "GPT backup partition table"},
		{"md0.90le", size, func(d *strictReader) {
			off := size&^(64<<10-1) - 64<<10
			d.write(off, le32(0xa92b4efc))
		}, "md superblock 0.90"},
		{"md0.90be", size, func(d *strictReader) {
			off := size&^(64<<10-1) - 64<<10
			d.write(off, be32(0xa92b4efc))
		}, "md superblock 0.90"},
		{"md1.0", size, md1(((size>>9 - 16) &^ 7) << 9), "md superblock 1.0"},
		{"md1.1", size, md1(0), "md superblock 1.1"},
		{"md1.2", size, md1(4096), "md superblock 1.2"},
		{"lvm2", size, func(d *strictReader) {
			d.write(512, []byte("LABELONE"))
			d.write(512+24, []byte("LVM2 001"))
		}, "LVM2 physical volume"},
		{"luks1", size, func(d *strictReader) { d.write(0, []byte("LUKS\xba\xbe")); d.write(6, []byte{0, 1}) }, "LUKS header"},
		{"luks2-secondary", size, func(d *strictReader) { d.write(16384, []byte("SKUL\xba\xbe")) }, "LUKS2 secondary header"},
		{"bcache", size, func(d *strictReader) {
			d.write(4096+24, []byte("\xc6\x85\x73\xf6\x4e\x1a\x45\xca\x82\x65\xf5\x7f\x48\xba\x6d\x81"))
		}, "bcache superblock"},
		{"bcachefs", size, func(d *strictReader) {
			d.write(4096+24, []byte("\xc6\x85\x73\xf6\x66\xce\x90\xa9\xd9\x6a\x60\xcf\x80\x3d\xf7\xef"))
		}, "bcachefs filesystem"},
		{"zfs", size, func(d *strictReader) {
			d.write(128<<10+5<<10, binary.LittleEndian.AppendUint64(nil, 0x00bab10c))
			d.write(128<<10+5<<10+8, binary.LittleEndian.AppendUint64(nil, 5000))
		}, "zfs pool label"},
		{"zfs-end-labels-be", size, func(d *strictReader) {
			l3 := size&^(256<<10-1) - 256<<10
			d.write(l3+128<<10+4<<10, binary.BigEndian.AppendUint64(nil, 0x00bab10c))
			d.write(l3+128<<10+4<<10+8, binary.BigEndian.AppendUint64(nil, 28))
		}, "zfs pool label"},
		{"f2fs", size, func(d *strictReader) { d.write(1024, le32(0xF2F52010)) }, "f2fs filesystem"},
		{"bluestore", size, func(d *strictReader) { d.write(0, []byte("bluestore block device\nd2b3f0a2")) }, "Ceph BlueStore device"},
		{"vdo", size, func(d *strictReader) { d.write(0, []byte("dmvdo001")) }, "VDO volume"},
		{"dm-integrity", size, func(d *strictReader) { d.write(0, []byte("integrt\x00\x05")) }, "dm-integrity superblock"},
		{"swsuspend", size, func(d *strictReader) { d.write(4096-10, []byte("S1SUSPEND\x00")) }, "swap space with a hibernation image"},
		{"ublk-raid", size, func(d *strictReader) { d.write(4096, []byte("ublkraid")) }, "ublk-raid superblock"},
	}
}

func TestDetectEachSignature(t *testing.T) {
	for _, f := range fixtures() {
		d := newDevice(f.size)
		f.write(d)
		got, err := Detect(d, f.size)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		found := false
		for _, s := range got {
			found = found || s.Type == f.want
		}
		if !found {
			t.Errorf("%s: found %v, want %q", f.name, got, f.want)
		}
	}
}

// A blank device, and data that only looks like a signature in part,
// give nothing.
func TestDetectNothing(t *testing.T) {
	size := int64(64 * mib)
	for _, tc := range []struct {
		name  string
		write func(d *strictReader)
	}{
		{"blank", func(*strictReader) {}},
		{"ext magic with an impossible block size", func(d *strictReader) {
			d.write(1024+0x18, le32(40))
			d.write(1024+0x38, le16(0xEF53))
		}},
		{"boot signature without partition entries", func(d *strictReader) { d.write(510, []byte{0x55, 0xaa}) }},
		{"boot signature with a bad partition status", func(d *strictReader) {
			d.write(446, []byte{0x13, 0, 0, 0, 0x83})
			d.write(510, []byte{0x55, 0xaa})
		}},
		{"md magic of another major version", func(d *strictReader) { d.write(4096, le32(0xa92b4efc)); d.write(4100, le32(7)) }},
		{"LVM label without its type", func(d *strictReader) { d.write(0, []byte("LABELONE")) }},
		{"swap signature off a page end", func(d *strictReader) { d.write(4000, []byte("SWAPSPACE2")) }},
	} {
		d := newDevice(size)
		tc.write(d)
		got, err := Detect(d, size)
		if err != nil || len(got) != 0 {
			t.Errorf("%s: %v %v, want nothing", tc.name, got, err)
		}
	}
}

// Several signatures on one device are all named.
func TestDetectSeveral(t *testing.T) {
	size := int64(64 * mib)
	d := newDevice(size)
	d.write(1024+0x38, le16(0xEF53))
	d.write(((size>>9-16)&^7)<<9, le32(0xa92b4efc))
	d.write(((size>>9-16)&^7)<<9+4, le32(1))
	got, err := Detect(d, size)
	if err != nil || len(got) != 2 {
		t.Fatalf("got %v %v, want ext2 and md 1.0", got, err)
	}
	if msg := Describe(got); !strings.Contains(msg, "md superblock 1.0 (at byte") || !strings.Contains(msg, "ext2 filesystem (at byte 1080)") {
		t.Fatalf("description %q", msg)
	}
}

// Every read stays on the device, however small; a read error is
// returned, not taken for "nothing found".
func TestDetectBoundedReads(t *testing.T) {
	for _, size := range []int64{0, 1, 511, 512, 1000, 2048, 4096, 4100, 8192, 65536, 65600, 128 << 10, 1 * mib} {
		d := newDevice(size)
		if _, err := Detect(d, size); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
	}
	// Told the device is larger than it is: the failing read surfaces.
	d := newDevice(4096)
	if _, err := Detect(d, 1<<20); err == nil {
		t.Fatal("a read error was ignored")
	}
}

// On a real (sparse) file, as the array package uses it.
func TestDetectFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "dev")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(32 * mib); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XFSB"), 0); err != nil {
		t.Fatal(err)
	}
	got, err := Detect(f, 32*mib)
	if err != nil || len(got) != 1 || got[0].Type != "xfs filesystem" || got[0].Offset != 0 {
		t.Fatalf("got %v %v", got, err)
	}
	var short io.ReaderAt = f
	if _, err := Detect(short, 64*mib); err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading past the end of the file: %v", err)
	}
}

// The fixtures other packages' tests write are found as what they are.
func TestDetectProbetestFixtures(t *testing.T) {
	for kind, want := range probetest.Kinds {
		p := filepath.Join(t.TempDir(), kind)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 32*mib+3*512); err != nil {
			t.Fatal(err)
		}
		probetest.Write(t, p, kind)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Detect(f, 32*mib+3*512)
		f.Close()
		if err != nil || len(got) == 0 || !slices.ContainsFunc(got, func(s Signature) bool { return s.Type == want }) {
			t.Errorf("%s: found %v %v, want %q", kind, got, err, want)
		}
	}
}

// Copies kept at both ends are each reported, so erasing what Detect
// found leaves nothing for it (or blkid) to find.
func TestDetectReportsEveryCopy(t *testing.T) {
	size := int64(64 * mib)
	d := newDevice(size)
	d.write(512, []byte("EFI PART"))
	d.write(size-512, []byte("EFI PART"))
	d.write(0, []byte("LUKS\xba\xbe"))
	d.write(32<<10, []byte("SKUL\xba\xbe"))
	got, err := Detect(d, size)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, s := range got {
		types = append(types, s.Type)
		if s.Length <= 0 || s.Offset < 0 || s.Offset+int64(s.Length) > size {
			t.Errorf("%v: bad extent", s)
		}
	}
	for _, want := range []string{"GPT partition table", "GPT backup partition table", "LUKS header", "LUKS2 secondary header"} {
		if !slices.Contains(types, want) {
			t.Errorf("found %v, want %q among them", types, want)
		}
	}
}
