package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Signature is one thing found on a device.
type Signature struct {
	// Type names what was found: "ext4 filesystem", "md superblock 1.2",
	// "GPT partition table", ...
	Type string
	// Offset and Length are where the magic that identified it lies:
	// zeroing them is enough for this check (and blkid) not to see it
	// again, as wipefs does.
	Offset int64
	Length int
}

func (s Signature) String() string { return fmt.Sprintf("%s (at byte %d)", s.Type, s.Offset) }

// Describe joins signatures for a one-line message.
func Describe(sigs []Signature) string {
	parts := make([]string, len(sigs))
	for i, s := range sigs {
		parts[i] = s.String()
	}
	return strings.Join(parts, ", ")
}

// Magic numbers and where they are.
const (
	extSBOffset   = 1024
	extMagic      = 0xEF53
	btrfsMagicAt  = 64<<10 + 64
	mdMagic       = 0xa92b4efc
	md12Offset    = 4096
	ublkMagicAt   = 4096
	ublkMagic     = "ublkraid" // engine.SuperblockMagic at engine.SuperblockOffset
	bcacheMagicAt = 4096 + 24  // the superblock at sector 8, its magic after csum, offset, version
	bcacheMagic   = "\xc6\x85\x73\xf6\x4e\x1a\x45\xca\x82\x65\xf5\x7f\x48\xba\x6d\x81"
	bchfsMagic    = "\xc6\x85\x73\xf6\x66\xce\x90\xa9\xd9\x6a\x60\xcf\x80\x3d\xf7\xef"
)

// Detect reads the signatures off r, a device of size bytes: every read
// lies within [0, size). It returns what it found (none: nil) or the
// first read error.
func Detect(r io.ReaderAt, size int64) ([]Signature, error) {
	d := &detector{r: r, size: size}
	d.ublkRaid()
	d.md()
	d.bcache()
	d.luks()
	d.lvm()
	d.ext()
	d.xfs()
	d.btrfs()
	d.f2fs()
	d.startMagic()
	d.bootSector() // vfat, exfat, ntfs, MBR
	d.gpt()
	d.swap()
	d.zfs()
	if d.err != nil {
		return nil, d.err
	}
	return d.found, nil
}

type detector struct {
	r     io.ReaderAt
	size  int64
	found []Signature
	err   error
}

// at reads n bytes at off; nil when they are not all on the device (or a
// read failed: the error is kept).
func (d *detector) at(off int64, n int) []byte {
	if d.err != nil || off < 0 || n <= 0 || off > d.size || int64(n) > d.size-off {
		return nil
	}
	b := make([]byte, n)
	got, err := d.r.ReadAt(b, off)
	if got == n {
		return b
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	d.err = fmt.Errorf("reading %d bytes at %d: %w", n, off, err)
	return nil
}

func (d *detector) add(typ string, off int64, n int) {
	d.found = append(d.found, Signature{Type: typ, Offset: off, Length: n})
}

// has reports whether the bytes at off are magic.
func (d *detector) has(off int64, magic string) bool {
	b := d.at(off, len(magic))
	return b != nil && string(b) == magic
}

func (d *detector) ublkRaid() {
	if d.has(ublkMagicAt, ublkMagic) {
		d.add("ublk-raid superblock", ublkMagicAt, len(ublkMagic))
	}
}

// md: 0.90 in the last 64 KiB-aligned 64 KiB of the device (host
// endian), 1.0 8 KiB from the end (4 KiB aligned), 1.1 at the start, 1.2
// 4 KiB from the start (little endian, major version 1).
func (d *detector) md() {
	le := binary.LittleEndian
	v1 := func(off int64, minor string) {
		if b := d.at(off, 8); b != nil && le.Uint32(b) == mdMagic && le.Uint32(b[4:]) == 1 {
			d.add("md superblock 1."+minor, off, 4)
		}
	}
	v1(0, "1")
	v1(md12Offset, "2")
	if sectors := d.size >> 9; sectors >= 16+8 {
		v1(((sectors-16)&^7)<<9, "0")
	}
	if d.size >= 128<<10 {
		off := d.size&^(64<<10-1) - 64<<10
		if b := d.at(off, 8); b != nil {
			for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
				if bo.Uint32(b) == mdMagic && bo.Uint32(b[4:]) == 0 {
					d.add("md superblock 0.90", off, 4)
					break
				}
			}
		}
	}
}

// bcache: a backing or cache device (its data follows the superblock),
// or bcachefs, which keeps the superblock there (with bcache's magic in
// its first versions).
func (d *detector) bcache() {
	switch b := d.at(bcacheMagicAt, len(bcacheMagic)); string(b) {
	case bcacheMagic:
		d.add("bcache superblock", bcacheMagicAt, len(bcacheMagic))
	case bchfsMagic:
		d.add("bcachefs filesystem", bcacheMagicAt, len(bchfsMagic))
	}
}

func (d *detector) luks() {
	if d.has(0, "LUKS\xba\xbe") {
		d.add("LUKS header", 0, 6)
	}
	// LUKS2 keeps a second header at one of these offsets.
	for off := int64(16 << 10); off <= 4<<20; off <<= 1 {
		if d.has(off, "SKUL\xba\xbe") {
			d.add("LUKS2 secondary header", off, 6)
			return
		}
	}
}

// lvm: the label is in one of the first four sectors.
func (d *detector) lvm() {
	for s := int64(0); s < 4; s++ {
		if b := d.at(s*512, 32); b != nil && string(b[:8]) == "LABELONE" && string(b[24:32]) == "LVM2 001" {
			d.add("LVM2 physical volume", s*512, 8)
			return
		}
	}
}

// ext: the superblock at 1 KiB; the kind from its feature flags.
func (d *detector) ext() {
	b := d.at(extSBOffset, 1024)
	if b == nil {
		return
	}
	le := binary.LittleEndian
	if le.Uint16(b[0x38:]) != extMagic || le.Uint32(b[0x18:]) > 6 { // log2(block size)-10: up to 64 KiB
		return
	}
	compat, incompat, roCompat := le.Uint32(b[0x5c:]), le.Uint32(b[0x60:]), le.Uint32(b[0x64:])
	kind := "ext2"
	switch {
	case incompat&0x8 != 0: // JOURNAL_DEV
		kind = "ext3/4 external journal"
	case incompat&^0x6 != 0 || roCompat&^0x7 != 0: // beyond ext3's filetype/recover, sparse_super/large_file/btree_dir
		kind = "ext4"
	case compat&0x4 != 0: // HAS_JOURNAL
		kind = "ext3"
	}
	d.add(kind+" filesystem", extSBOffset+0x38, 2)
}

func (d *detector) xfs() {
	if d.has(0, "XFSB") {
		d.add("xfs filesystem", 0, 4)
	}
}

func (d *detector) btrfs() {
	if d.has(btrfsMagicAt, "_BHRfS_M") {
		d.add("btrfs filesystem", btrfsMagicAt, 8)
	}
}

// f2fs: the superblock at 1 KiB, its magic first.
func (d *detector) f2fs() {
	if b := d.at(extSBOffset, 4); b != nil && binary.LittleEndian.Uint32(b) == 0xF2F52010 {
		d.add("f2fs filesystem", extSBOffset, 4)
	}
}

// startMagic: formats whose magic opens the device.
func (d *detector) startMagic() {
	for _, f := range []struct{ magic, name string }{
		{"bluestore block device", "Ceph BlueStore device"},
		{"dmvdo001", "VDO volume"},
		{"integrt\x00", "dm-integrity superblock"},
	} {
		if d.has(0, f.magic) {
			d.add(f.name, 0, len(f.magic))
		}
	}
}

// bootSector: exfat and ntfs by their OEM name, vfat by its filesystem
// type string and a sane sector size, else an MBR partition table (the
// 0x55AA signature and a plausible partition entry).
func (d *detector) bootSector() {
	b := d.at(0, 512)
	if b == nil {
		return
	}
	switch string(b[3:11]) {
	case "EXFAT   ":
		d.add("exfat filesystem", 3, 8)
		return
	case "NTFS    ":
		d.add("ntfs filesystem", 3, 8)
		return
	}
	bps := binary.LittleEndian.Uint16(b[11:])
	saneBPS := bps >= 512 && bps <= 4096 && bps&(bps-1) == 0
	if saneBPS && b[13] != 0 { // sectors per cluster
		for _, t := range []struct {
			off  int64
			name string
		}{{82, "FAT32   "}, {54, "FAT16   "}, {54, "FAT12   "}, {54, "FAT     "}} {
			if string(b[t.off:t.off+8]) == t.name {
				d.add("vfat filesystem", t.off, 8)
				return
			}
		}
	}
	if b[510] != 0x55 || b[511] != 0xaa {
		return
	}
	used, protective := false, false
	for i := range 4 {
		e := b[446+16*i : 446+16*(i+1)]
		if e[0] != 0 && e[0] != 0x80 {
			return // not a partition entry: some other boot sector
		}
		if e[4] != 0 {
			used = true
			protective = protective || e[4] == 0xee
		}
	}
	switch {
	case protective:
		d.add("GPT protective MBR", 510, 2)
	case used:
		d.add("MBR partition table", 510, 2)
	}
}

// gpt: the header at LBA 1 (512- or 4096-byte sectors) and the backup
// header at the last LBA; each found is reported (both must go for the
// table to be gone).
func (d *detector) gpt() {
	for _, pair := range [][2]int64{{512, 4096}, {d.size - 512, d.size - 4096}} {
		what := "GPT partition table"
		if pair[0] != 512 {
			what = "GPT backup partition table"
		}
		for _, off := range pair {
			if off > 0 && d.has(off, "EFI PART") {
				d.add(what, off, 8)
				break
			}
		}
	}
}

// swap: the signature ends the first page (of 4, 8, 16, 32 or 64 KiB, as
// libblkid looks for it).
func (d *detector) swap() {
	for _, ps := range []int64{4096, 8192, 16384, 32768, 65536} {
		b := d.at(ps-10, 10)
		if b == nil {
			continue
		}
		if bytes.Equal(b, []byte("SWAPSPACE2")) || bytes.Equal(b, []byte("SWAP-SPACE")) {
			d.add("swap space", ps-10, 10)
			return
		}
		// A hibernation image written over swap replaces the signature
		// (restored at resume): the swap holds a suspended system.
		for _, m := range []string{"S1SUSPEND", "S2SUSPEND", "ULSUSPEND", "LINHIB0001"} {
			if bytes.HasPrefix(b, []byte(m)) {
				d.add("swap space with a hibernation image", ps-10, 10)
				return
			}
		}
	}
}

// zfs: a pool's vdev labels, 256 KiB each, two at the start and two at
// the end of the device (its size rounded down to 256 KiB); the second
// half of each is the uberblock ring, whose entries (1 KiB apart or
// more) start with the uberblock magic in the pool's byte order and its
// on-disk version. Each label found is reported with its whole ring:
// zeroing the rings leaves no uberblock for this check (or blkid).
func (d *detector) zfs() {
	const label, ring, slot = 256 << 10, 128 << 10, 1 << 10
	const ubMagic, maxVersion = 0x00bab10c, 5000
	end := d.size &^ (label - 1)
	seen := map[int64]bool{}
	for _, off := range []int64{0, label, end - 2*label, end - label} {
		if off < 0 || seen[off] {
			continue // a device too small for four labels
		}
		seen[off] = true
		b := d.at(off+ring, ring)
		if b == nil {
			continue
		}
	slots:
		for s := 0; s+16 <= len(b); s += slot {
			for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
				if v := bo.Uint64(b[s+8:]); bo.Uint64(b[s:]) == ubMagic && v >= 1 && v <= maxVersion {
					d.add("zfs pool label", off+ring, ring)
					break slots
				}
			}
		}
	}
}
