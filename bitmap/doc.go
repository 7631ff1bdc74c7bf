// Package bitmap is ublk-raid's write-intent bitmap: the array's address
// space is cut into regions (DefaultRegionSectors), each clean, dirty or
// never written, with a copy of the states in every member's reserved area
// (format.go). A write to a region first makes it dirty on every member; a
// region goes clean lazily when it has been idle. After a crash only the
// dirty regions need resync, after a member comes back only the dirty
// regions need recovery, and never-written regions need neither.
//
// The package is a deterministic core in the style of etcd's raft: it
// starts no goroutines, does no I/O and reads no clock. Its inputs are
// method calls (time is passed to Tick); its outputs are batches of block
// writes for the caller to perform and tokens of writes the caller may
// let proceed.
//
// # Threads
//
// Queue threads (one per ublk queue, each locked to its OS thread, which
// never block), any number, concurrently:
//
//   - StartWrite(first, last, token) before a data write. True: write now
//     (every region is durable-dirty; a couple of atomic operations and no
//     lock). False: hold the write; token comes back from Committed. The
//     slow path takes a mutex briefly, only when a region is not
//     durable-dirty, and may call Options.Notify (which must not block).
//   - EndWrite(first, last) once the write has completed on every member
//     it went to (one atomic add per region). Every StartWrite, ready or
//     not, has exactly one EndWrite, after the write completed.
//   - Regions, Written, Dirty, NeedsSync, CopiesDiffer, ResyncDone,
//     MarkNeedsSync, MarkFill, SetMissing, Stats,
//     WaitTimes, Buffer, Geometry, EventsCleared.
//
// The flusher, one goroutine (never two of these at once):
//
//   - Prepare when notified, and again after every Committed: write each
//     returned Batch's blocks to every present member, durably (FUA, or
//     write and flush where a member has a volatile cache), in parallel;
//     when all are done call Committed and route the released tokens to
//     their queues (a queue-local inbox and an eventfd wake, for instance).
//   - Tick every TickInterval with a monotonic time: it clears idle regions
//     and returns a batch (or nil) like Prepare.
//   - SetEvents, RewriteAll, ClearIdle, ClearBlocked, DirtyRegions, State,
//     HasWork, Events, TickInterval.
//
// A Batch's block buffers belong to the Bitmap (Buffer, for io_uring
// registration) and stay unchanged until its Committed. Options.Notify is
// called on a queue thread. Tokens are released exactly once each.
//
// Before serving, the bitmap comes from Create (new array) or Assemble
// (Load, falling back to AllDirty when the on-disk bitmap cannot be
// trusted). Their first batches rewrite the whole copy, data blocks then
// header; a write proceeds only once its regions' block has committed.
//
// # Safety
//
// D(r) below is region r's durable-dirty flag; it shares one atomic word
// with r's count of writes in flight.
//
// No data write reaches a member before its regions are dirty on disk. A
// write W goes to the members only when StartWrite returned true or
// Committed released its token; either way D(r) was seen set for each of
// its regions after W's increment of the in-flight count (by the increment
// itself, or by a load under the mutex or in Committed). D(r) is set only
// by Committed, for regions a block of the batch says dirty, once every
// block of the batch is on every present member. D(r) is cleared only by
// the clear's compare-and-swap, which needs the in-flight count to be zero
// in the same word, so it cannot happen between W's increment and its
// EndWrite; and only a clear makes the image say clean again. A block is
// in at most one batch in flight, so no older write of r's block can land
// after the committed one. Hence from before W is issued until it ends,
// every present member's copy says r is dirty, and so does every block
// write of r's block in flight.
//
// No region is cleared before its last write completed. A block says r is
// clean only if it was built after a successful clear, which needs no
// write in flight (EndWrite comes after completion on every member), no
// member missing, r not needing sync, and (in Tick) no completion seen for
// r's clear delay. A write starting after the clear finds D(r) unset and
// waits; the set batch it needs cannot be prepared before the clear's batch
// commits (its block is busy), so the clean state is overwritten with dirty
// on every member before that write is issued. If the write comes before
// the clear was put in a batch, the clear is simply dropped (the block goes
// out saying dirty).
//
// So every state in any copy or in any block write in flight is true or
// more cautious than the truth, whatever subset of a batch's writes landed,
// tore or were lost; Load takes, per region, the most cautious state among
// the valid copies of the in-sync members, so after a crash every region
// whose copies could differ is dirty. A torn block fails its checksum; a
// block unreadable on every member makes Assemble fall back to every region
// dirty.
//
// # Member failure and the superblock
//
// When a member fails or goes missing: SetMissing(member, true) (before the
// EndWrite of any write that failed on it), then SetEvents(new generation);
// once the batch carrying that header commits, write the superblocks
// recording the failure. Like md (md_write_start waits for pending
// superblock changes), do not issue new data writes until then: a copy
// whose header events are older than the superblock's is ignored by Load,
// and until the superblock is written the failed member's copy still counts.
// On re-add: RewriteAll and SetEvents, recover the regions Dirty (asked
// as the recovery goes, not a snapshot: writes issued until the member was
// writable again went to the others only) onto the member, then
// SetMissing(member, false). That covers what the member missed only if
// no region was cleared after it left: if its superblock events are older
// than EventsCleared (md's events_cleared, in the header, durable before
// any clear of its generation: see Tick), copy every written region
// instead.
//
// # Resync
//
// After Load, dirty regions need sync (NeedsSync) and are never cleared
// until ResyncDone: copy each from one chosen copy to the others (reads of
// a region that needs sync go to that copy, so answers are stable), with
// the resync's writes bracketed by StartWrite and EndWrite like any write.
// Rebuild of a new member copies every written region and skips the
// never-written ones (Written).
//
// A region that was never written may hold different garbage on different
// members. Its first write calls Options.FirstWrite, whose MarkFill keeps
// the region from being cleared until a resync made all of it equal
// (ResyncDone); reads are not redirected meanwhile (CopiesDiffer), since
// the written parts are equal on every copy. Reads of never-written data
// are undefined until then.
package bitmap
