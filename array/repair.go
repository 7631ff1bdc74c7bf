package array

import (
	"context"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// exclusiveBarrier shares the array's barrier (the write barrier of
// copies, the stripe lock's sync side for parity) between the syncer and
// the read-repair worker: one range is raised at a time (Raise waits for
// the other's Lower, or for its context: a job stopped while the other
// waits for writes that no queue serves any more, as at Close, must not
// wait for it).
type exclusiveBarrier struct {
	b   resync.Barrier
	sem chan struct{} // holds a token while a range is raised
}

func newExclusiveBarrier(b resync.Barrier) *exclusiveBarrier {
	return &exclusiveBarrier{b: b, sem: make(chan struct{}, 1)}
}

func (x *exclusiveBarrier) Raise(ctx context.Context, sector, sectors uint64) error {
	select {
	case x.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := x.b.Raise(ctx, sector, sectors); err != nil { // lowered again
		<-x.sem
		return err
	}
	return nil
}

func (x *exclusiveBarrier) Lower() {
	x.b.Lower()
	<-x.sem
}

// repairReq is a range a queue read from one copy after other copies (the
// roles in bad) failed it. For raid5/6 it is member sectors [sector,
// sector+sectors) of the roles in bad (one stripe's rows).
type repairReq struct {
	sector  uint64
	sectors uint32
	bad     uint64
	from    int32 // raid1/10: the copy the read answered from; -1: any good one
}

// repairBytes is the repair worker's buffer: it bounds one repair step,
// half of it for raid1/10 (the other half takes the read back); a queue
// reports ranges of one retry unit, 4 KiB by default.
const repairBytes = 1 << 20

// A repair step's I/O goes through memberIO's bounce buffers: it must fit
// one (this constant overflows, and the build fails, if it does not).
const _ = uint(bounceSize - repairBytes)

// requestRepair queues a read repair (engine.Executor.ReadRepair; queue
// threads). It never blocks: when the queue is full the range is left as
// it is, and the next read that fails on it reports it again.
func (a *Array) requestRepair(sector uint64, sectors uint32, bad uint64) {
	a.requestRepairFrom(sector, sectors, bad, -1)
}

// requestRepairFrom is requestRepair of a range a read answered from
// member from: the rewrite copies that copy (engine.Executor.ReadRepair).
func (a *Array) requestRepairFrom(sector uint64, sectors uint32, bad uint64, from int32) {
	select {
	case a.repairs <- repairReq{sector, sectors, bad, from}:
	default:
	}
}

// startRepairs starts the read-repair worker (arrays with redundancy).
func (a *Array) startRepairs() {
	a.repairs = make(chan repairReq, 256)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	a.stopRepairs = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		// Page-aligned for O_DIRECT.
		buf, err := unix.Mmap(-1, 0, repairBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return // no repairs: bad copies stay until rewritten
		}
		defer unix.Munmap(buf)
		io := newMemberIO(a)
		defer io.bounce.close()
		for {
			select {
			case <-ctx.Done():
				return
			case r := <-a.repairs:
				a.repair(ctx, r, buf, io)
			}
		}
	}()
}

// repair rewrites the bad copies of r's range from a good one, with the
// range raised so that no user write to it is in flight or starts: the
// copy read is the newest data, and nothing overwrites the rewrite with
// something older. Each rewrite is read back (md's fix_read_error): a
// rewrite, or a read back, that fails fails its member (a bad sector the
// rewrite did not cure; never the last in-sync copy).
func (a *Array) repair(ctx context.Context, r repairReq, buf []byte, io memberIO) {
	if a.Engine.Parity != nil {
		a.repairParity(ctx, r, buf, io)
		return
	}
	if r.bad = a.countReadErrors(r, time.Now()); r.bad == 0 {
		return
	}
	// The first half holds the good copy, the second the reads back.
	half := len(buf) / 2
	buf, back := buf[:half], buf[half:]
	g := a.Engine.Geo
	var locs [engine.MaxCopies]engine.Location
	for s, end := r.sector, r.sector+uint64(r.sectors); s < end; {
		n := min(end-s, uint64(len(buf)>>9), g.ChunkEnd(s))
		if err := a.xbar.Raise(ctx, s, n); err != nil {
			return
		}
		st := a.Engine.State()
		ls := g.Locate(s, locs[:0])
		// The source is the copy the read answered from: in a range
		// awaiting resync the copies may differ, and the next read must
		// answer the same (when its read fails now, nothing is rewritten:
		// the next read that fails reports the range again). Without it
		// (r.from < 0), the lowest-numbered good copy: what a read of a
		// range awaiting resync answers (engine.LowestMember), and what
		// resync copies from. (Slot order is not member order with three
		// raid10 copies.) In sync, every good copy holds the same.
		slices.SortFunc(ls, func(x, y engine.Location) int { return int(x.Member) - int(y.Member) })
		p := buf[:n<<9]
		got := false
		for _, l := range ls {
			if r.from >= 0 && l.Member != int(r.from) {
				continue
			}
			m := st.Members[l.Member]
			ok := m.State == engine.MemberActive || (m.State == engine.MemberRebuilding && m.RebuildOffset >= l.Sector+n)
			if ok && r.bad&(1<<uint(l.Member)) == 0 && io.ReadAt(l.Member, p, l.Sector) == nil && a.sameMember(st, l.Member) {
				got = true
				break
			}
		}
		if got {
			for _, l := range ls {
				if r.bad&(1<<uint(l.Member)) == 0 || !writable(st.Members[l.Member]) || !a.sameMember(st, l.Member) {
					continue // (a device put in the role since is rebuilt whole)
				}
				err := io.WriteAt(l.Member, p, l.Sector)
				if err == nil {
					err = io.ReadAt(l.Member, back[:n<<9], l.Sector)
				}
				if err != nil {
					// (never the last in-sync copy: md's rule; and not a
					// device put in the role during the write: the check
					// and the failure one step, FailRedundantIf)
					if st, changed, _, _ := a.Engine.FailRedundantIf(l.Member, st.Members[l.Member].Since); changed {
						a.persist(st)
					}
					continue
				}
				a.readRepairs.Add(1)
			}
		}
		a.xbar.Lower()
		s += n
	}
}

// maxCorrReadErrors is how many read errors a raid1/10 member may have
// repaired before it is failed instead (md's max_corr_read_errors,
// default 20, of raid1 and raid10): a device whose sectors keep going bad
// is failing, and each error costs the reads that meet it a retry and the
// array a repair. (raid5/6: maxParityReadErrors.)
const maxCorrReadErrors = 20

// maxParityReadErrors is how many reads in a row a raid5/6 member may
// fail, each answered from the others and its rows rewritten, before it
// is failed instead (md's raid5: more than its stripe cache's size,
// max_nr_stripes, 256 by default; a read of the device that succeeds
// starts the count again). Never the member whose loss would lose data.
const maxParityReadErrors = 256

// readErrCount is a role's count of failed reads, halved for every hour
// since the last (md's check_decay_read_errors), for the device that took
// the role at generation since. The queues count failed member reads
// (readErrs, in Array); the repair worker takes what came since it last
// looked (seen) when a repair of the role comes: one failed read counts
// once, however many retry units of it are reported for repair (md
// counts a failed read once).
type readErrCount struct {
	since, n, seen uint64
	last           time.Time
}

// countReadErr counts a failed read of a member (queue threads: the
// executor's MemberError, once per member and request), timeouts
// included; a member too busy to take it (EAGAIN) did not fail it.
func (a *Array) countReadErr(member int, kind engine.IOKind, res int32) {
	if kind == engine.IORead && res != -int32(unix.EAGAIN) && member >= 0 && member < len(a.readErrs) {
		a.readErrs[member].Add(1)
	}
}

// parityReadOK starts member's count of failed reads again (raid5/6:
// the queues' MemberReadOK, for each member read that succeeded). Stored
// only when not zero: the count's cache line stays shared between the
// queues while reads succeed.
func (a *Array) parityReadOK(member int) {
	if member >= 0 && member < len(a.readErrs) && a.readErrs[member].Load() != 0 {
		a.readErrs[member].Store(0)
	}
}

// parityReadErrors returns bad without the raid5/6 roles it failed for
// having failed more than maxParityReadErrors reads in a row (never past
// the parity's budget: FailRedundantIf). The repair worker only.
func (a *Array) parityReadErrors(bad uint64) uint64 {
	st := a.Engine.State()
	for role := range st.Members {
		if bad&(1<<uint(role)) == 0 || role >= len(a.readErrs) {
			continue
		}
		c := &a.readErrCounts[role]
		since := st.Members[role].Since
		if c.last.IsZero() {
			*c = readErrCount{since: since, last: time.Now()}
		} else if c.since != since {
			// Another device in the role, or its rebuild ended: the
			// read this repair is for is the first counted.
			*c = readErrCount{since: since, last: time.Now()}
			if a.readErrs[role].Load() > 1 {
				a.readErrs[role].Store(1)
			}
			continue
		}
		if a.readErrs[role].Load() <= maxParityReadErrors {
			continue
		}
		bad = a.failForReadErrors(role, since, bad)
	}
	return bad
}

// failForReadErrors fails role, held since generation since, past its
// read-error budget (never the last copy of something: FailRedundantIf),
// and returns bad without it if it is out.
func (a *Array) failForReadErrors(role int, since, bad uint64) uint64 {
	st, changed, out, _ := a.Engine.FailRedundantIf(role, since)
	if changed {
		a.persist(st)
	}
	if out {
		bad &^= 1 << uint(role)
	}
	return bad
}

// countReadErrors takes the failed reads of each role of r.bad counted
// since it last looked and returns r.bad without the roles it failed for
// going past maxCorrReadErrors (never the last copy: that one stays, and
// is repaired). The repair worker only.
func (a *Array) countReadErrors(r repairReq, now time.Time) uint64 {
	bad := r.bad
	st := a.Engine.State()
	for role := range st.Members {
		if bad&(1<<uint(role)) == 0 || role >= len(a.readErrs) {
			continue
		}
		c := &a.readErrCounts[role]
		seen := a.readErrs[role].Load()
		since := st.Members[role].Since
		if c.last.IsZero() {
			*c = readErrCount{since: since, last: now}
		} else if c.since != since {
			// The role's state changed (a new device in it, or its
			// rebuild ended): the read this repair is for is the first
			// counted (those before may be a predecessor's).
			*c = readErrCount{since: since, last: now, seen: seen - min(seen, 1)}
		}
		if seen == c.seen {
			continue // (a read counted already)
		}
		if h := now.Sub(c.last) / time.Hour; h >= 64 {
			c.n = 0
		} else if h > 0 {
			c.n >>= uint(h)
		}
		c.last = now
		c.n += seen - c.seen
		c.seen = seen
		if c.n <= maxCorrReadErrors {
			continue
		}
		bad = a.failForReadErrors(role, since, bad)
	}
	return bad
}

// sameMember reports whether role still holds the member st saw, checked
// after reading from it: a device is put into a role only once the role
// is faulty or missing, a state change (a new Since) that comes first, so
// an unchanged Since means the read was served by that member and not by
// a device put in its role since (a spare or a replacement, holding
// anything), whose data must not be copied over a copy as good.
func (a *Array) sameMember(st *engine.ArrayState, role int) bool {
	return a.Engine.State().Members[role].Since == st.Members[role].Since
}

// ReadRepairs is how many ranges of a copy were rewritten after a read
// error, and read back.
func (a *Array) ReadRepairs() uint64 { return a.readRepairs.Load() }
