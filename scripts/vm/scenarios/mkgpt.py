#!/usr/bin/env python3
"""mkgpt.py DEV: writes a GPT with one Linux partition on DEV (protective MBR,
primary header and entries at the start, backup entries and header at the
end), as sfdisk would, for the bad-input scenario on hosts without sfdisk."""
import os
import struct
import sys
import uuid
import zlib

SECTOR = 512
ENTRIES = 128
ENTRY_SIZE = 128
LINUX_DATA = uuid.UUID("0FC63DAF-8483-4772-8E79-3D69D8477DE4")


def header(my_lba, alt_lba, entries_lba, first, last, disk_guid, entries_crc):
    h = bytearray(92)
    struct.pack_into("<8sIIIIQQQQ16sQIII", h, 0, b"EFI PART", 0x00010000, 92, 0, 0, my_lba, alt_lba, first, last,
                     disk_guid.bytes_le, entries_lba, ENTRIES, ENTRY_SIZE, entries_crc)
    struct.pack_into("<I", h, 16, zlib.crc32(h))
    return bytes(h) + bytes(SECTOR - 92)


def main(dev):
    fd = os.open(dev, os.O_RDWR)
    try:
        sectors = os.lseek(fd, 0, os.SEEK_END) // SECTOR
        last = sectors - 1
        table_sectors = ENTRIES * ENTRY_SIZE // SECTOR  # 32
        first_usable, last_usable = 2 + table_sectors, last - 1 - table_sectors
        entries = bytearray(ENTRIES * ENTRY_SIZE)
        struct.pack_into("<16s16sQQQ", entries, 0, LINUX_DATA.bytes_le, uuid.uuid4().bytes_le, 2048,
                         last_usable - 2048, 0)
        name = "ublk-raid-test".encode("utf-16-le")
        entries[56:56 + len(name)] = name
        ecrc = zlib.crc32(entries)
        disk = uuid.uuid4()
        mbr = bytearray(SECTOR)
        struct.pack_into("<B3sB3sII", mbr, 446, 0, b"\0\x02\0", 0xEE, b"\xff\xff\xff", 1, min(last, 0xFFFFFFFF))
        mbr[510:512] = b"\x55\xaa"
        os.pwrite(fd, bytes(mbr), 0)
        os.pwrite(fd, header(1, last, 2, first_usable, last_usable, disk, ecrc), SECTOR)
        os.pwrite(fd, bytes(entries), 2 * SECTOR)
        os.pwrite(fd, bytes(entries), (last - table_sectors) * SECTOR)
        os.pwrite(fd, header(last, 1, last - table_sectors, first_usable, last_usable, disk, ecrc), last * SECTOR)
        os.fsync(fd)
    finally:
        os.close(fd)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: mkgpt.py DEV")
    main(sys.argv[1])
