// Package engine is ublk-raid's deterministic RAID core: geometry and
// md-compatible layouts, I/O planning, member state transitions and the
// on-disk superblock. It does no I/O itself: it turns requests and member
// events into plans (data), which the queue loop executes on its ring and
// which tests execute against in-memory and fault-injecting members.
//
// The parity levels have files of their own, not wired into the executor
// or the superblock yet (arrays are still raid0, raid1 and raid10):
//   - raid56_geometry.go maps raid5 and raid6 stripes as md does (its four
//     rotating layouts, P and Q members, the syndrome order of the data);
//   - parity.go computes md's P and Q bytes without allocating (both are
//     checked against the real md driver in the VM,
//     TestVMParityLayoutMatchesKernelMD);
//   - raid56_plan.go plans a read of one stripe (direct, or rebuilding
//     lost chunks from the others, P before Q) and a write to one stripe:
//     per run of rows, read-modify-write or reconstruct-write by md's
//     rule, or what lost members leave (the old data of missing chunks
//     rebuilt from the parity first, or data only when no parity member
//     is left);
//   - stripelock.go gives a request of any queue its stripes alone
//     (non-blocking, all or none, with wake-ups for the queues that wait),
//     so that no parity is computed from another request's half-written
//     stripe.
package engine
