// Package engine is ublk-raid's deterministic RAID core: geometry and
// md-compatible layouts, I/O planning, member state transitions and the
// on-disk superblock. It does no I/O itself: it turns requests and member
// events into plans (data), which the queue loop executes on its ring and
// which tests execute against in-memory and fault-injecting members.
package engine
