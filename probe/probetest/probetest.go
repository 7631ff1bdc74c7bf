package probetest

import (
	"encoding/binary"
	"os"
	"testing"
)

// Kinds are the signatures Write knows, each with the Type package probe
// reports for it.
var Kinds = map[string]string{
	"ext4":   "ext4 filesystem",
	"xfs":    "xfs filesystem",
	"btrfs":  "btrfs filesystem",
	"vfat":   "vfat filesystem",
	"swap":   "swap space",
	"mbr":    "MBR partition table",
	"gpt":    "GPT partition table",
	"md0.90": "md superblock 0.90",
	"md1.0":  "md superblock 1.0",
	"md1.1":  "md superblock 1.1",
	"md1.2":  "md superblock 1.2",
	"lvm2":   "LVM2 physical volume",
	"luks":   "LUKS header",
}

// Write writes the signature of kind (a key of Kinds) into the file at
// path, whose size must already be the device's.
func Write(t testing.TB, path, kind string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size()
	le := binary.LittleEndian
	at := func(off int64, b []byte) {
		t.Helper()
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	md := func(off int64, major uint32) {
		at(off, le.AppendUint32(le.AppendUint32(nil, 0xa92b4efc), major))
	}
	switch kind {
	case "ext4":
		at(1024+0x18, le.AppendUint32(nil, 2)) // 4 KiB blocks
		at(1024+0x38, le.AppendUint16(nil, 0xEF53))
		at(1024+0x5c, le.AppendUint32(nil, 0x3c))  // has_journal, ext_attr, resize_inode, dir_index
		at(1024+0x60, le.AppendUint32(nil, 0x2c2)) // filetype, extents, 64bit, flex_bg
		at(1024+0x64, le.AppendUint32(nil, 0x46b)) // sparse_super, large_file, huge_file, dir_nlink, extra_isize, metadata_csum
	case "xfs":
		at(0, []byte("XFSB"))
	case "btrfs":
		at(64<<10+64, []byte("_BHRfS_M"))
	case "vfat":
		at(11, le.AppendUint16(nil, 512))
		at(13, []byte{8})
		at(82, []byte("FAT32   "))
		at(510, []byte{0x55, 0xaa})
	case "swap":
		at(4096-10, []byte("SWAPSPACE2"))
	case "mbr":
		at(446, []byte{0x80, 0, 0, 0, 0x83})
		at(510, []byte{0x55, 0xaa})
	case "gpt":
		at(446, []byte{0, 0, 0, 0, 0xee})
		at(510, []byte{0x55, 0xaa})
		at(512, []byte("EFI PART"))
		at(size-512, []byte("EFI PART"))
	case "md0.90":
		md(size&^(64<<10-1)-64<<10, 0)
	case "md1.0":
		md(((size>>9-16)&^7)<<9, 1)
	case "md1.1":
		md(0, 1)
	case "md1.2":
		md(4096, 1)
	case "lvm2":
		at(512, []byte("LABELONE"))
		at(512+24, []byte("LVM2 001"))
	case "luks":
		at(0, []byte("LUKS\xba\xbe\x00\x02"))
	default:
		t.Fatalf("probetest: unknown signature %q", kind)
	}
}
