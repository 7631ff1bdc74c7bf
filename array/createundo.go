package array

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
)

// A new array's creation writes its members (signature wipes, superblocks,
// the write-hole log headers, the bitmap, the dirty mark) before the
// caller knows whether its device can be served: the ublk driver may still
// refuse the device (no memory, its device limit, a number taken
// meanwhile). A refused command must leave the members as they were, so
// until the caller keeps the array (Array.KeepCreated) every write to a
// member first saves the bytes it replaces, and Array.CloseUndoCreated
// writes them back.

// undoLog is what a creation overwrote on one member: the bytes each write
// replaced, in the order written.
type undoLog struct {
	mu      sync.Mutex
	entries []undoEntry
	seen    map[int64]int // offset → length of a range saved exactly there
}

type undoEntry struct {
	off  int64
	data []byte
	// path: a plain write to the regular file at path (zeroTail), not
	// through the device.
	path string
}

// save keeps the n bytes of d at off before a write replaces them. A range
// saved already is not saved again: the first save holds the bytes from
// before the creation, and restore writes the first saves last.
func (u *undoLog) save(d Device, off int64, n int) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen[off] >= n {
		return nil
	}
	buf, free, err := alignedBuf(n)
	if err != nil {
		return err
	}
	defer free()
	if err := d.ReadAt(buf, off); err != nil {
		return fmt.Errorf("cannot save the %d bytes at %d before overwriting them: %w", n, off, err)
	}
	u.entries = append(u.entries, undoEntry{off: off, data: slices.Clone(buf)})
	if u.seen == nil {
		u.seen = map[int64]int{}
	}
	u.seen[off] = n
	return nil
}

// saveFile keeps the n bytes at off of the regular file at path before a
// plain write replaces them.
func (u *undoLog) saveFile(path string, off, n int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return fmt.Errorf("cannot save the %d bytes at %d before overwriting them: %w", n, off, err)
	}
	u.mu.Lock()
	u.entries = append(u.entries, undoEntry{off: off, data: b, path: path})
	u.mu.Unlock()
	return nil
}

// restore writes back every saved range, the last saved first (so that
// each byte ends as the first save of it found it), then flushes d.
func (u *undoLog) restore(d Device) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for _, e := range slices.Backward(u.entries) {
		if e.path != "" {
			errs = append(errs, restoreFileAt(e.path, e.data, e.off))
			continue
		}
		buf, free, err := alignedBuf(len(e.data))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		copy(buf, e.data)
		if err := d.WriteAt(buf, e.off); err != nil {
			errs = append(errs, fmt.Errorf("%d bytes at %d: %w", len(e.data), e.off, err))
		}
		free()
	}
	if err := d.Flush(); err != nil {
		errs = append(errs, err)
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
		if err := u.save(m.Device, off, len(p)); err != nil {
			return err
		}
	}
	return m.Device.WriteAt(p, off)
}

// WriteAtDurable is Device.WriteAtDurable, saving as WriteAt does.
func (m *Member) WriteAtDurable(p []byte, off int64) error {
	if u := m.undo.Load(); u != nil {
		if err := u.save(m.Device, off, len(p)); err != nil {
			return err
		}
	}
	return m.Device.WriteAtDurable(p, off)
}

// beginUndo makes every write to ms save what it replaces.
func beginUndo(ms []*Member) {
	for _, m := range ms {
		m.undo.Store(&undoLog{})
	}
}

// endUndo stops the saving and forgets what was saved.
func endUndo(ms []*Member) {
	for _, m := range ms {
		m.undo.Store(nil)
	}
}

// undoWrites writes back what ms's writes replaced since beginUndo, and
// ends the saving.
func undoWrites(ms []*Member) error {
	var errs []error
	for _, m := range ms {
		u := m.undo.Swap(nil)
		if u == nil {
			continue
		}
		if err := u.restore(m.Device); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Path, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("restoring what creating the array overwrote: %w", err)
	}
	return nil
}

// KeepCreated keeps a new array (Created) on its members: its device
// serves it. From here on its writes no longer save what they replace, and
// CloseUndoCreated can no longer undo the creation. Nothing for an
// assembled array.
func (a *Array) KeepCreated() {
	a.mu.Lock()
	ms := a.createUndo
	a.createUndo = nil
	a.mu.Unlock()
	endUndo(ms)
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
