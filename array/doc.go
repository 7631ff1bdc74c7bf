// Package array is a RAID array served over ublk: it opens the members,
// creates or assembles the array from their superblocks (replaying a
// raid5/6 array's write-hole log first), runs one request executor per
// ublk queue on that queue's ring (engine.Executor for raid0/1/10,
// engine.ParityExecutor for raid5/6), persists member state changes to
// the superblocks, and runs the background jobs (resync, rebuild, check,
// repair, read repair) and the write-intent bitmap's flusher.
//
// Threads: queue handlers run on their queue's locked thread (see package
// ublk); superblock updates are serialised by Array.mu and may be called
// from any queue thread (a member failure blocks the queue that reports it
// until the new state is durable, which is rare and brief).
//
// A superblock block goes to a member through writeSB only: the shadow
// copy first, then the primary, each flushed (engine/superblock_shadow.go),
// and is read back through engine.ReadSuperblock only, so that a power cut
// tearing an update on every member at once leaves an array that
// assembles.
//
// A role's device as the queues see it is a roleDevice, published under
// Array.mu with Array.Members each time a device takes the role (the same
// device re-added included): an operation records the one it went to, and
// an error or timeout of an operation whose role has had another device
// since blames nobody (queue.Departed, failHolding). A write given up after
// the member timeout keeps every operation off its device until it returns
// (Member.lateWrites). Each Member counts the operations out on it, given
// up or not (Member.out, one cache line per queue; Member.jobOut, the
// background jobs' and read repair's), across a re-add in place: remove
// refuses the device, and replace keeps it open, while any is out, as
// md's nr_pending.
//
// A new array (Created, CreateSpec.Undoable) may still be undone until
// the caller keeps it (KeepCreated, once its device serves it):
// meanwhile each write to a member through Member.WriteAt or
// WriteAtDurable first saves the bytes it replaces, and CloseUndoCreated
// writes them back (createundo.go), so that a create refused after its
// first write leaves the members as they were; a spare is not activated
// before KeepCreated.
package array
