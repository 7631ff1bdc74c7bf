// Package engine is ublk-raid's deterministic RAID core: geometry and
// md-compatible layouts, I/O planning, member state transitions,
// assembly and the on-disk superblock. It does no I/O itself: it turns
// requests and member events into plans (data), which the queue loop
// executes on its ring (a Backend) and which tests execute against
// in-memory and fault-injecting members.
//
// raid0, raid1 and raid10 (geometry.go, plan.go, exec.go):
//   - Executor runs one queue's requests: it plans member operations,
//     retries reads on other copies, fails a member on an error (never the
//     last in-sync copy: the request fails with ErrLastCopy instead), and
//     acknowledges a request only once any failure it saw is durable
//     (Backend.Persist, Persisted). Writes wait for the write-intent bitmap
//     (IntentLog) before any member operation is issued.
//
// raid5 and raid6 have files of their own beside those (raid56_*.go):
//   - raid56_geometry.go maps stripes as md does (its four rotating
//     layouts, P and Q members, the syndrome order of the data);
//     parity.go computes md's P and Q bytes without allocating (both
//     checked against the real md driver in the VM);
//   - raid56_plan.go plans a stripe's reads (direct, or rebuilding lost
//     chunks) and writes (read-modify-write or reconstruct-write by md's
//     rule, or what lost members leave);
//   - stripelock.go gives a request of any queue its stripes alone, so
//     that no parity is computed from another request's half-written
//     stripe;
//   - raid56_exec.go (ParityExecutor) runs one queue's requests with the
//     same member-failure and durability contract as Executor;
//   - raid56_log*.go: the write-hole log (a partial-parity entry per
//     written stripe segment, durable on its parity members before the
//     segment's data and parity writes; rings per queue; checkpoints), and
//     its scan at assembly (ScanParityLogFrom, ParityLogReplay);
//   - raid56_heal.go: a write that failed on a member kept as the last
//     copy makes its stripe's parity match the data again from its log
//     entry before it fails, or fails with ErrStripeUnhealed.
//
// Errors wrap with %w; package ublk maps them to the errno committed to
// the kernel in one place (commitResult).
package engine
