// Package array is a RAID array served over ublk: it opens the members,
// creates or assembles the array from their superblocks, runs one
// engine.Executor per ublk queue on that queue's ring, and persists member
// state changes to the superblocks.
//
// Threads: queue handlers run on their queue's locked thread (see package
// ublk); superblock updates are serialised by Array.mu and may be called
// from any queue thread (a member failure blocks the queue that reports it
// until the new state is durable, which is rare and brief).
package array
