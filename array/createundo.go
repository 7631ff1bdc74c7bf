package array

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// A new array's creation writes its members (signature wipes, superblocks,
// the write-hole log headers, the bitmap, the dirty mark) before the
// caller knows whether its device can be served: the ublk driver may still
// refuse the device (no memory, its device limit, a number taken
// meanwhile). A refused command must leave the members as they were, so
// from the create's first write until the caller keeps the array
// (Array.KeepCreated; as Open returns unless CreateSpec.Undoable) every
// write to a member through Member.WriteAt or WriteAtDurable first saves
// the bytes it replaces, and Array.CloseUndoCreated writes them back. (An
// Open that fails part way through its writes writes them back itself.)

// undoLog is what a creation overwrote on its members (one log for all of
// them): the bytes each write replaced, in the order written, across
// members (two names of one disk, before distinctDevices refuses them,
// each save what the other wrote: only the order across both puts back
// what was there first).
type undoLog struct {
	mu      sync.Mutex
	entries []undoEntry
	seen    map[undoKey]int // a range saved already: its length
}

type undoKey struct {
	m   *Member
	off int64
}

type undoEntry struct {
	m    *Member
	off  int64
	n    int
	data []byte
	// unreadable: the bytes could not be read before the write (data is
	// nil): the undo cannot put them back. pending: the read has not
	// returned (a hung member).
	unreadable error
	pending    bool
	// path: a plain write to the regular file at path (zeroTail), not
	// through the device.
	path string
}

// save keeps the n bytes of m at off before a write replaces them. A range
// of m saved already is not saved again: the first save holds the bytes
// from before the creation, and restore writes the first saves last. The
// entry takes its place in the order before the read, which is made
// outside the log's lock: a member that hangs holds up its own write
// only, not the other members' nor the undo.
func (u *undoLog) save(m *Member, off int64, n int) error {
	u.mu.Lock()
	if u.seen[undoKey{m, off}] >= n {
		u.mu.Unlock()
		return nil
	}
	if u.seen == nil {
		u.seen = map[undoKey]int{}
	}
	u.seen[undoKey{m, off}] = n
	i := len(u.entries)
	u.entries = append(u.entries, undoEntry{m: m, off: off, n: n, pending: true})
	u.mu.Unlock()
	buf, free, err := alignedBuf(n)
	if err != nil {
		u.mu.Lock()
		u.entries[i].pending, u.entries[i].unreadable = false, err
		u.mu.Unlock()
		return err
	}
	defer free()
	rerr := m.Device.ReadAt(buf, off)
	u.mu.Lock()
	defer u.mu.Unlock()
	e := &u.entries[i]
	e.pending = false
	if rerr != nil {
		// Unreadable (a pending sector, which the write remaps): the
		// create goes on, as md's, which never reads there; an undo
		// says these bytes were not restored.
		e.unreadable = rerr
	} else {
		e.data = slices.Clone(buf)
	}
	return nil
}

// saveFile keeps the n bytes at off of m's regular file before a plain
// write replaces them.
func (u *undoLog) saveFile(m *Member, off, n int64) error {
	f, err := os.Open(m.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return fmt.Errorf("cannot save the %d bytes at %d before overwriting them: %w", n, off, err)
	}
	u.mu.Lock()
	u.entries = append(u.entries, undoEntry{m: m, off: off, n: int(n), data: b, path: m.Path})
	u.mu.Unlock()
	return nil
}

// restore writes back every saved range but those of the members in skip,
// the last saved first (so that each byte ends as the first save of it
// found it), then flushes each member written.
func (u *undoLog) restore(skip map[*Member]bool) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	var written []*Member
	for _, e := range slices.Backward(u.entries) {
		if skip[e.m] {
			continue
		}
		if !slices.Contains(written, e.m) {
			written = append(written, e.m)
		}
		if e.path != "" {
			if err := restoreFileAt(e.path, e.data, e.off); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", e.m.Path, err))
			}
			continue
		}
		if e.pending {
			errs = append(errs, fmt.Errorf("%s: the %d bytes at %d could not be saved (the read did not return)", e.m.Path, e.n, e.off))
			continue
		}
		if e.unreadable != nil {
			errs = append(errs, fmt.Errorf("%s: the %d bytes at %d, unreadable before the create (%w), hold what it wrote", e.m.Path, e.n, e.off, e.unreadable))
			continue
		}
		buf, free, err := alignedBuf(len(e.data))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		copy(buf, e.data)
		if err := e.m.Device.WriteAt(buf, e.off); err != nil {
			errs = append(errs, fmt.Errorf("%s: %d bytes at %d: %w", e.m.Path, len(e.data), e.off, err))
		}
		free()
	}
	for _, m := range written {
		if err := m.Device.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Path, err))
		}
	}
	return errors.Join(errs...)
}

func restoreFileAt(path string, b []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		return err
	}
	return f.Sync()
}

// WriteAt writes p at off (Device.WriteAt), saving what it replaces first
// while a creation may still be undone.
func (m *Member) WriteAt(p []byte, off int64) error {
	if u := m.undo.Load(); u != nil {
		if err := u.save(m, off, len(p)); err != nil {
			return err
		}
	}
	return m.Device.WriteAt(p, off)
}

// WriteAtDurable is Device.WriteAtDurable, saving as WriteAt does.
func (m *Member) WriteAtDurable(p []byte, off int64) error {
	if u := m.undo.Load(); u != nil {
		if err := u.save(m, off, len(p)); err != nil {
			return err
		}
	}
	return m.Device.WriteAtDurable(p, off)
}

// beginUndo makes every write to ms save what it replaces, in one log.
func beginUndo(ms []*Member) {
	u := &undoLog{}
	for _, m := range ms {
		m.undo.Store(u)
	}
}

// endUndo stops the saving and forgets what was saved.
func endUndo(ms []*Member) {
	for _, m := range ms {
		m.undo.Store(nil)
	}
}

// undoLateWait bounds how long an undo waits for a write given up on a
// member (past the member timeout) to return before it gives up that
// member's undo.
const undoLateWait = 5 * time.Second

// undoWrites writes back what ms's writes replaced since beginUndo, and
// ends the saving. A member with a write given up after the member
// timeout still out is waited for, up to wait: restored under it, the
// bytes could be overwritten again when the device carries the write
// out; still out then, the member is left and the error names it.
func undoWrites(ms []*Member, wait time.Duration) error {
	var u *undoLog
	for _, m := range ms {
		if l := m.undo.Swap(nil); l != nil {
			u = l
		}
	}
	if u == nil {
		return nil
	}
	var errs []error
	skip := map[*Member]bool{}
	deadline := time.Now().Add(wait)
	for _, m := range ms {
		for lateOut(m) && time.Now().Before(deadline) {
			time.Sleep(lateWait)
		}
		if lateOut(m) {
			skip[m] = true
			errs = append(errs, fmt.Errorf("%s: a write given up after the member timeout is still out on it: not restored", m.Path))
		}
	}
	if err := u.restore(skip); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("restoring what creating the array overwrote: %w", err)
	}
	return nil
}

// lateOut reports whether a write given up on m may still land: any
// operation given up (late.go), a superblock or log checkpoint write out.
func lateOut(m *Member) bool {
	return lateOn(m) || m.lateWrites.Load() > 0 || m.sbWriting.Load() || m.logHeaderWriting.Load()
}

// KeepCreated keeps a new array (Created) on its members: its device
// serves it. From here on its writes no longer save what they replace, and
// CloseUndoCreated can no longer undo the creation. Nothing for an
// assembled array.
func (a *Array) KeepCreated() {
	a.mu.Lock()
	ms := a.createUndo
	a.createUndo = nil
	spare := a.spareLater
	a.spareLater = false
	a.mu.Unlock()
	endUndo(ms)
	if spare {
		go a.activateSpare()
	}
}

// CloseUndoCreated closes a new array whose device was not made (the
// caller's command is refused) and writes back on its members what its
// creation overwrote, leaving them as they were before Open. For an
// array kept (KeepCreated) or assembled it is Close.
func (a *Array) CloseUndoCreated() error {
	a.mu.Lock()
	a.undoOnClose = a.createUndo != nil
	a.mu.Unlock()
	a.Close()
	return a.undoErr
}
