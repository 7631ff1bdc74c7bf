// Package engine is ublk-raid's deterministic RAID core: geometry and
// md-compatible layouts, I/O planning, member state transitions and the
// on-disk superblock. It does no I/O itself: it turns requests and member
// events into plans (data), which the queue loop executes on its ring and
// which tests execute against in-memory and fault-injecting members.
//
// The parity levels have files of their own: raid56_geometry.go maps
// raid5 and raid6 stripes as md does (its four rotating layouts, P and Q
// members, the syndrome order of the data), parity.go computes md's P and
// Q bytes without allocating, and raid56_plan.go plans a read of one
// stripe (direct, or rebuilding lost chunks from the others and P before
// Q) and a write to one stripe: per run of rows, read-modify-write or reconstruct-write by md's
// rule, or what lost members leave (rebuilding the old data of missing
// chunks from the parity first, or writing data only when no parity member
// is left). The geometry and parity are checked against the real md driver
// in the VM (TestVMParityLayoutMatchesKernelMD). None of it is wired into
// the executor or the superblock yet: arrays are still raid0, raid1 and
// raid10.
package engine
