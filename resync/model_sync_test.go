package resync_test

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ublk-raid/ublk-raid/resync"
)

// The stack model runs resync.Syncer's job on its own goroutine, as the
// array does, but as a coroutine: every call the job makes into the model
// (member I/O, Need, Progress, OnMemberError, and ctx.Err, which
// engine.Barrier.Raise polls while writes are in flight) is an event the
// job sends and then waits on until the model replies. Between two events
// the job runs alone; while it waits, the model runs alone. So the
// interleaving of the job with user I/O is decided by the model's draws
// only, rapid can shrink it, and nothing races.
//
// Raise is the one place a job waits for user writes: it publishes the
// raised range, then polls ctx.Err while writes in the range are in
// flight. An Err event right after a Need the model answered true is
// therefore "blocked in Raise"; the model resumes it only after some
// write finished (Executor exits), so no real time is spent spinning.

type coKind int

const (
	cRead coKind = iota
	cWrite
	cFlush
	cNeed
	cProgress
	cMemberErr
	cErr
	cDone
)

func (k coKind) String() string {
	return [...]string{"read", "write", "flush", "need", "progress", "member-error", "ctx.Err", "done"}[k]
}

type coEvent struct {
	kind             coKind
	role             int
	p                []byte
	sector           uint64
	a, n             uint64 // Need: array range
	reached, durable uint64 // Progress
	err              error
	res              resync.Result
	dev              *device // member I/O: the device in the role when the job called
}

type coReply struct {
	err error
	ok  bool
}

// coSync is one job run as a coroutine.
type coSync struct {
	job   resync.Job
	ev    chan coEvent
	reply chan coReply
	done  chan struct{}
	// dead is set when the world the job belongs to crashed: the job's
	// calls return at once and change nothing.
	dead atomic.Bool
	// cur is the event the job waits on (nil while it runs).
	cur *coEvent
	// inRaise: the last Need was answered true, so the job is in Raise
	// until its next member operation or Progress.
	inRaise bool
	// blockedAt is the model's count of finished writes when the job was
	// found blocked in Raise.
	blockedAt int
	// since is each rebuild target's MemberStatus.Since when the job was
	// started.
	since []uint64
}

// errGone answers the calls of a job whose world crashed.
var errGone = context.Canceled

func (c *coSync) call(e coEvent) coReply {
	if c.dead.Load() {
		return coReply{err: errGone}
	}
	c.ev <- e
	return <-c.reply
}

// kill ends the job without letting it touch anything: its calls fail
// from now on; it is waited for.
func (c *coSync) kill() {
	c.dead.Store(true)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case c.reply <- coReply{err: errGone}:
		case <-c.ev:
		case <-c.done:
			return
		case <-deadline:
			panic("model: a killed sync job does not end")
		}
	}
}

// coMembers is the job's resync.Members: every operation is an event.
type coMembers struct{ c *coSync }

func (x coMembers) ReadAt(role int, p []byte, sector uint64) error {
	return x.c.call(coEvent{kind: cRead, role: role, p: p, sector: sector}).err
}

func (x coMembers) WriteAt(role int, p []byte, sector uint64) error {
	return x.c.call(coEvent{kind: cWrite, role: role, p: p, sector: sector}).err
}

func (x coMembers) Flush(role int) error {
	return x.c.call(coEvent{kind: cFlush, role: role}).err
}

// coCtx is the job's context: Err is an event (see above).
type coCtx struct {
	context.Context
	c *coSync
}

func (x coCtx) Err() error {
	if x.c.dead.Load() {
		return context.Canceled
	}
	return x.c.call(coEvent{kind: cErr}).err
}

// modelClock is the job's Clock: the model's time; sleeping takes none.
type modelClock struct{ now *atomic.Int64 }

func (c modelClock) Now() time.Time {
	return time.Unix(1_000_000, 0).Add(time.Duration(c.now.Load()))
}

func (c modelClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
