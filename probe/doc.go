// Package probe finds on-disk signatures that say a device holds data:
// filesystems (ext2/3/4, xfs, btrfs, f2fs, vfat, exfat, ntfs), swap (and
// a hibernation image in it), Ceph BlueStore, VDO, dm-integrity, partition
// tables (MBR, GPT), md RAID superblocks (0.90, 1.0, 1.1, 1.2), LVM2
// physical volumes, LUKS headers, bcache and bcachefs superblocks, zfs
// pool labels and ublk-raid superblocks. ublk-raid refuses to overwrite
// such a device unless told to (--force), as mdadm asks before creating
// an array over one.
//
// The checks read the magic numbers at their documented offsets
// themselves (no libblkid): a handful of small reads, each bounded by the
// device size given, so they run on files in tests as on block devices.
// A match says what a device looks like, not that it is in use; a device
// without a match may still hold data of a kind not checked for.
package probe
