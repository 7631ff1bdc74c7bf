// Package memdev is in-memory member devices for tests of package array:
// disks with a volatile write cache that a power cut drops in part, fault
// injection (errors on chosen ranges and operations, unsupported discard
// and write-zeroes, hangs), and processes that a kill -9 ends without
// touching the disks.
//
// A Rack holds the disks and the one process (the daemon) that opens
// them. A write completes into the disk's cache, sector by sector (the
// newest data of each sector); Flush makes the cache stable, a durable
// write (FUA) makes its own sectors stable. PowerCut keeps any subset of
// each disk's cached sectors, drawn from the rack's random source (a
// multi-sector write is torn at sector boundaries, superblock and bitmap
// writes included), and ends the process. CutAfter arms a power cut in
// the middle of a later write: that write's sectors are kept in part too.
// Kill ends the process only: the caches stay, as on a kill -9.
package memdev
