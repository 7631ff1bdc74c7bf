#!/usr/bin/env python3
"""Writer and checker of the power-cut-during-rebuild test (crash-rebuild-test.sh).

  pcut.py fill DEV LOG NONCE BLOCKS  lay out BLOCKS 4 KiB blocks at the start of
                                     DEV with generation-0 data, flush; write
                                     the header (nonce, blocks) to LOG's slot 0
  pcut.py write DEV LOG              O_DIRECT|O_DSYNC writes of 1-8 blocks at
                                     pseudo-random offsets until killed; after
                                     each write is acknowledged, its record
                                     (seq, block, count, tag) goes to LOG slot
                                     seq+1 with O_DIRECT|O_DSYNC
  pcut.py verify DEV LOG             read the records back (up to the first
                                     invalid slot) and check every 512-byte
                                     sector of the area: it holds the data of
                                     the last acknowledged write that covered
                                     it (generation 0 if none), or - only for
                                     the one write that may have been in flight
                                     at the cut - that write's data

LOG is a disk outside the array. Every sector written carries its own header
(nonce, tag, sector number) and a body derived from them, so a sector from the
wrong write, the wrong place or an older copy is told apart from the right one.
Offsets and sizes come from random.Random(nonce), so the checker knows the one
write after the last record (in flight, or acknowledged with its record lost).
"""
import mmap
import os
import random
import struct
import sys
import zlib

BS = 4096
SECT = 512
SPB = BS // SECT
MASK = (1 << 64) - 1
HDR_MAGIC = b"UBRPHDR1"
REC_MAGIC = b"UBRPREC1"


def sector(nonce, tag, sno):
    head = struct.pack("<8sQQQ", b"UBRPCUT!", nonce, tag, sno)
    v = (nonce ^ (tag * 0x9E3779B97F4A7C15) ^ (sno * 0xC2B2AE3D27D4EB4F)) & MASK
    return head + struct.pack("<Q", v) * ((SECT - len(head)) // 8)


def block(nonce, tag, b):
    return b"".join(sector(nonce, tag, b * SPB + s) for s in range(SPB))


def plan(nonce, blocks):
    """Yields (seq, first block, count, tag) of the writes, in order."""
    rng = random.Random(nonce)
    seq = 0
    while True:
        n = rng.choice((1, 1, 1, 2, 4, 8))
        b = rng.randrange(blocks - n + 1)
        yield seq, b, n, seq + 1
        seq += 1


def slot(kind, *fields):
    body = struct.pack("<8s" + "Q" * len(fields), kind, *fields)
    body += struct.pack("<I", zlib.crc32(body))
    return body + bytes(BS - len(body))


def unslot(kind, nfields, raw):
    n = 8 + 8 * nfields
    body = raw[:n]
    if body[:8] != kind or struct.unpack("<I", raw[n:n + 4])[0] != zlib.crc32(body):
        return None
    return struct.unpack("<" + "Q" * nfields, body[8:])


def opendirect(path, sync):
    flags = os.O_RDWR | os.O_DIRECT | (os.O_DSYNC if sync else 0)
    return os.open(path, flags)


def pwrite_all(fd, buf, off):
    mv = memoryview(buf)
    while len(mv):
        n = os.pwrite(fd, mv, off)
        mv = mv[n:]
        off += n


def put(fd, data, off):
    m = mmap.mmap(-1, len(data))
    m.write(data)
    pwrite_all(fd, m, off)
    m.close()


def fill(dev, log, nonce, blocks):
    fd = opendirect(dev, False)
    chunk = 256
    for b0 in range(0, blocks, chunk):
        n = min(chunk, blocks - b0)
        put(fd, b"".join(block(nonce, 0, b) for b in range(b0, b0 + n)), b0 * BS)
    os.fsync(fd)
    os.close(fd)
    lfd = opendirect(log, True)
    put(lfd, slot(HDR_MAGIC, nonce, blocks), 0)
    put(lfd, bytes(BS), BS)  # no stale record 0
    os.close(lfd)


def header(lfd):
    m = mmap.mmap(-1, BS)
    h = None
    if os.preadv(lfd, [m], 0) == BS:
        h = unslot(HDR_MAGIC, 2, bytes(m))
    m.close()
    if h is None:
        sys.exit("pcut: no header in the log")
    return h


def write(dev, log):
    lfd = opendirect(log, True)
    nonce, blocks = header(lfd)
    fd = opendirect(dev, True)
    buf = mmap.mmap(-1, 8 * BS)
    rec = mmap.mmap(-1, BS)
    for seq, b, n, tag in plan(nonce, blocks):
        data = b"".join(block(nonce, tag, x) for x in range(b, b + n))
        buf.seek(0)
        buf.write(data)
        pwrite_all(fd, memoryview(buf)[:n * BS], b * BS)
        # acknowledged: record it before the next write
        rec.seek(0)
        rec.write(slot(REC_MAGIC, nonce, seq, b, n, tag))
        pwrite_all(lfd, rec, (seq + 1) * BS)
        if seq % 200 == 0:
            print(f"pcut: {seq + 1} writes acknowledged", file=sys.stderr, flush=True)


def verify(dev, log):
    lfd = opendirect(log, True)
    nonce, blocks = header(lfd)
    last = [0] * blocks
    m = mmap.mmap(-1, BS)
    acked = 0
    for seq, b, n, tag in plan(nonce, blocks):
        r = None
        if os.preadv(lfd, [m], (seq + 1) * BS) == BS:
            r = unslot(REC_MAGIC, 5, bytes(m))
        if r is None:
            inflight = (seq, b, n, tag)
            break
        if r != (nonce, seq, b, n, tag):
            sys.exit(f"pcut: log record {seq} is {r}, the plan says {(nonce, seq, b, n, tag)}")
        for x in range(b, b + n):
            last[x] = tag
        acked += 1
    _, ib, ic, itag = inflight
    print(f"pcut: {acked} acknowledged writes recorded; write {acked} (blocks {ib}-{ib + ic - 1}) may have been in flight")
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    chunk = 256
    buf = mmap.mmap(-1, chunk * BS)
    bad = 0
    newer = 0
    for b0 in range(0, blocks, chunk):
        n = min(chunk, blocks - b0)
        got = os.preadv(fd, [buf], b0 * BS)
        if got < n * BS:
            sys.exit(f"pcut: short read at block {b0}: {got} bytes")
        data = bytes(buf[:n * BS])
        for i in range(n):
            x = b0 + i
            have = data[i * BS:(i + 1) * BS]
            if have == block(nonce, last[x], x):
                continue
            for s in range(SPB):
                sno = x * SPB + s
                hs = have[s * SECT:(s + 1) * SECT]
                if hs == sector(nonce, last[x], sno):
                    continue
                if ib <= x < ib + ic and hs == sector(nonce, itag, sno):
                    newer += 1
                    continue
                bad += 1
                if bad <= 10:
                    what = "unrecognised data"
                    if hs[:8] == b"UBRPCUT!":
                        _, hn, ht, hsn = struct.unpack("<8sQQQ", hs[:32])
                        what = f"header nonce {hn:#x} tag {ht} sector {hsn}"
                        if hs != sector(hn, ht, hsn):
                            what += " (body damaged)"
                    print(f"pcut: sector {sno} (block {x}): want tag {last[x]}, found {what}")
    os.close(fd)
    if newer:
        print(f"pcut: {newer} sectors hold the in-flight write {acked} (allowed)")
    if bad:
        sys.exit(f"pcut: {bad} of {blocks * SPB} sectors do not hold the last acknowledged write")
    print(f"pcut: all {blocks * SPB} sectors hold their last acknowledged write")


def main():
    a = sys.argv[1:]
    if len(a) == 5 and a[0] == "fill":
        fill(a[1], a[2], int(a[3], 0), int(a[4]))
    elif len(a) == 3 and a[0] == "write":
        write(a[1], a[2])
    elif len(a) == 3 and a[0] == "verify":
        verify(a[1], a[2])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
