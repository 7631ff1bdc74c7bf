package ublk

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Props returns the member's properties.
func (m *Member) Props() *MemberProps { return &m.MemberProps }

// ReadAt reads len(p) bytes at off (p and off aligned for O_DIRECT). The
// call holds a reference on the file: closing the member meanwhile cannot
// hand its descriptor to another file under the read. Any goroutine.
func (m *Member) ReadAt(p []byte, off int64) error {
	return m.control(func(fd int) error {
		n, err := unix.Pread(fd, p, off)
		if err == nil && n != len(p) {
			err = ErrShortIO
		}
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", m.Path, off, err)
		}
		return nil
	})
}

// WriteAt writes p at off (aligned for O_DIRECT); the data may sit in the
// device's volatile cache until Flush. Holds a reference on the file, as
// ReadAt.
func (m *Member) WriteAt(p []byte, off int64) error {
	return m.control(func(fd int) error {
		n, err := unix.Pwrite(fd, p, off)
		if err == nil && n != len(p) {
			err = ErrShortIO
		}
		if err != nil {
			return fmt.Errorf("write %s at %d: %w", m.Path, off, err)
		}
		return nil
	})
}

// Flush makes every write completed before it durable (fdatasync).
// Holds a reference on the file, as ReadAt.
func (m *Member) Flush() error {
	return m.control(func(fd int) error {
		if err := unix.Fdatasync(fd); err != nil {
			return fmt.Errorf("flush %s: %w", m.Path, err)
		}
		return nil
	})
}

// control runs f on the member's descriptor, holding a reference on it.
func (m *Member) control(f func(fd int) error) error {
	rc, err := m.File.SyscallConn()
	if err != nil {
		return fmt.Errorf("%s: %w", m.Path, err)
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return fmt.Errorf("%s: %w", m.Path, err)
	}
	return ferr
}
