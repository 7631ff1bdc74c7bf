package array

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/probe"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// ErrSignature ends (wrapped) the refusal to overwrite a device that
// carries a signature of data (a filesystem, partition table, RAID or
// LVM metadata, another array's superblock): the caller may retry with
// force.
var ErrSignature = errors.New("--force overwrites it")

// checkBlank refuses m when it carries a signature probe recognises,
// unless force is set. Reads only.
func checkBlank(m *ublk.Member, force bool) error {
	if force {
		return nil
	}
	sigs, err := probe.Detect(memberReader{m}, m.Size)
	if err != nil {
		return fmt.Errorf("looking for signatures on %s: %w", m.Path, err)
	}
	if len(sigs) > 0 {
		return fmt.Errorf("%s carries %s; %w", m.Path, probe.Describe(sigs), ErrSignature)
	}
	return nil
}

// memberReader reads a member opened O_DIRECT at any offset: whole
// aligned blocks around the range, within the device.
type memberReader struct{ m *ublk.Member }

func (r memberReader) ReadAt(p []byte, off int64) (int, error) {
	const align = 4096
	if off < 0 || off >= r.m.Size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), r.m.Size)
	start := off &^ (align - 1)
	stop := (end + align - 1) &^ (align - 1)
	if lb := int64(max(r.m.LogicalBlock, 512)); stop > r.m.Size {
		stop = (r.m.Size + lb - 1) / lb * lb // a file may end short of it: the read is short then
	}
	buf, err := unix.Mmap(-1, 0, int(stop-start), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(buf)
	got, err := unix.Pread(r.m.Fd(), buf, start)
	if err != nil {
		return 0, fmt.Errorf("read %s at %d: %w", r.m.Path, start, err)
	}
	n := 0
	if have := start + int64(got); have > off {
		n = copy(p, buf[off-start:min(have, end)-start])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// checkNewDevice refuses a device that is to be written as a new member
// or spare of the array whose superblock is ref when it carries the
// superblock of another array, of a member of this one (re-add's job),
// or a signature of data; force overrides all of them. A spare of this
// array that was let go is taken as blank. Reads only.
func (a *Array) checkNewDevice(m *ublk.Member, ref *engine.Superblock, force bool) error {
	if force {
		return nil
	}
	if ref == nil {
		return errors.New("the array has no superblock to compare with")
	}
	if b, err := m.ReadBlock(engine.SuperblockOffset, engine.SuperblockSize); err == nil {
		if old, err := engine.ParseSuperblock(b); err == nil {
			switch {
			case old.ArrayUUID != ref.ArrayUUID:
				return fmt.Errorf("%s carries a superblock of array %s (name %q); %w",
					m.Path, engine.UUIDString(old.ArrayUUID), old.Name, ErrSignature)
			case !old.IsSpare():
				return fmt.Errorf("%s was role %d of this array: use re-add (--force overwrites it as a new device)", m.Path, old.Role)
			}
			return nil
		}
	}
	return checkBlank(m, false)
}
