#!/usr/bin/env python3
"""Crafts ublk-raid superblocks for the bad-input scenario.

sbpatch.py DEV FIELD VALUE...: sets 64-bit header fields of the superblock at
byte 4096 of DEV (see engine/superblock.go for the layout) and recomputes its
CRC-32C, so the block passes the checksum and only the values are wrong.
Refuses (exit 1) if DEV has no superblock or if its stored checksum does not
match this program's CRC-32C before the change: a wrong algorithm here must
not pass for a refusal by ublk-raid.
FIELD is data_offset (bytes), data_sectors or events; VALUE is an integer
(0x... accepted).
"""
import os
import struct
import sys

SB_OFFSET = 4096
SB_SIZE = 4096
CHECKSUM = 12
FIELDS = {"data_offset": 104, "data_sectors": 112, "events": 136}

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def checksum(block):
    b = bytearray(block)
    b[CHECKSUM:CHECKSUM + 4] = b"\0\0\0\0"
    return crc32c(b)


def main(argv):
    if len(argv) < 4 or len(argv) % 2 != 0:
        sys.exit("usage: sbpatch.py DEV FIELD VALUE [FIELD VALUE]...")
    dev = argv[1]
    fd = os.open(dev, os.O_RDWR)
    try:
        b = bytearray(os.pread(fd, SB_SIZE, SB_OFFSET))
        if b[:8] != b"ublkraid":
            sys.exit(f"sbpatch: {dev} has no ublk-raid superblock")
        stored = struct.unpack_from("<I", b, CHECKSUM)[0]
        if stored != checksum(b):
            sys.exit(f"sbpatch: {dev}: stored checksum {stored:#010x} != computed {checksum(b):#010x}")
        for field, value in zip(argv[2::2], argv[3::2]):
            if field not in FIELDS:
                sys.exit(f"sbpatch: unknown field {field}")
            struct.pack_into("<Q", b, FIELDS[field], int(value, 0))
        struct.pack_into("<I", b, CHECKSUM, checksum(b))
        os.pwrite(fd, bytes(b), SB_OFFSET)
        os.fsync(fd)
    finally:
        os.close(fd)


if __name__ == "__main__":
    main(sys.argv)
