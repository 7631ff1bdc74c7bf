// Package resync is ublk-raid's background copy engine: rebuilding a
// replaced or added member, resyncing copies after an unclean stop, and
// scrubbing (check, repair). It does member I/O through a Members
// interface, so it runs and is tested on the host without a kernel.
//
// # Threads and lifetimes
//
// A Syncer belongs to one array (an *engine.Array, its Barrier (an
// *engine.Barrier, or a wrapper that lets other goroutines raise it too) and
// its Members) for the array's lifetime. Run executes one job on the calling
// goroutine and returns when the job is done, fails, or its context ends; at
// most one Run is active per Syncer at a time (a second one fails with
// ErrBusy). Progress may be called from any goroutine at any time (for
// `detail`): it reads two atomics.
//
// Every step raises the Barrier on the array range it copies, so the user
// writes that share that Barrier (queue threads: Enter, plan from the
// current ArrayState, write every writable copy, Exit) never interleave
// with it. Steps are at most 1 MiB and never cross a chunk boundary; the
// job's buffers are allocated once per Run (4 KiB aligned).
//
// Members is called from Run's goroutine only, one operation at a time;
// the job's callbacks (Need, Progress, OnMemberError, Config.Busy) too.
// OnMemberError runs while the failing step's range is still raised, so it
// must not wait for user writes of the array (failing the member and
// persisting the new state is fine); the other callbacks run with nothing
// raised.
//
// Writers must Enter the Barrier before they load the ArrayState they plan
// with (see engine.Barrier.Enter), and the caller must make a target
// MemberRebuilding before starting its Rebuild: then every user write
// either completes before the step that copies its range, or sees the
// target and writes it too.
//
// # Rebuild progress and durability
//
// A rebuild walks the targets' member sectors upwards from Job.Start. After
// each step Job.Progress(reached, durable) says that every target sector
// below reached holds current data (the caller advances the targets'
// RebuildOffset to it, so reads may use them there), and that data below
// durable has been flushed on every member the job wrote (the caller may
// checkpoint durable to the superblocks, as it sees fit, and resume from it
// after a restart). The job flushes every Config.FlushInterval and at the
// end, and reports durable only after such a flush returned.
//
// A target is the member in its role when the job started (its
// engine.MemberStatus.Since): one failed, removed, or failed and put back
// (a new device in the role) while the job runs stops it with
// ErrTargetGone before progress is reported for it. Progress may still be
// on its way when that happens, so the caller advances RebuildOffset, and
// makes a target active at the end, only for a target whose Since is what
// it was when the job started.
//
// # Member errors
//
// A source copy that fails a read is read again block by block
// (Config.RetryUnit): the blocks it can read keep its data, each block it
// cannot read comes from the next readable copy, and the copies that
// failed are then rewritten with the result and read back (read repair,
// as the executor does for user reads; md's fix_read_error: a rewrite
// that does not read back is a member error). On raid5/6 (parity.go) a check, repair or
// resync rewrites each 4 KiB row a member fails to read from the parity
// and the others' rows, and reads it back (a resync P and Q rows only);
// a read error Job.Unrepairable says is not to be repaired (a timeout)
// stops the job as a failed write does. A member failed and replaced by a new device
// during a step is not read. A failed write or flush calls
// Job.OnMemberError for each member involved and stops the job with an
// error wrapping a *MemberError; failing the member is the caller's
// decision. A range of raid1/10 that no copy can be read from stops the
// job with an error wrapping engine.ErrNoCopy and blames no member (md
// fails none there either: it would not bring the data back).
package resync
