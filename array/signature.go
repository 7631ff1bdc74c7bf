package array

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/probe"
)

// ErrSignature ends (wrapped) the refusal to overwrite a device that
// carries a signature of data (a filesystem, partition table, RAID or
// LVM metadata, another array's superblock): the caller may retry with
// force.
var ErrSignature = errors.New("--force overwrites it")

// ublkRaidSignature is the type probe gives a ublk-raid superblock.
const ublkRaidSignature = "ublk-raid superblock"

// signatures are what probe found on a device.
type signatures = []probe.Signature

// checkBlank refuses m when it is read-only, and when it carries a
// signature probe recognises unless force is set; it returns what it
// found (for wipeSignatures once every check passed). Reads only.
func checkBlank(m *Member, force bool) (signatures, error) {
	return checkBlankBut(m, force, "")
}

// checkBlankBut is checkBlank ignoring signatures of type skip.
func checkBlankBut(m *Member, force bool, skip string) (signatures, error) {
	if err := checkWritable(m); err != nil { // (force or not)
		return nil, err
	}
	sigs, err := probe.Detect(memberReader{m}, m.Size)
	if err != nil {
		return nil, fmt.Errorf("looking for signatures on %s: %w", m.Path, err)
	}
	sigs = slices.DeleteFunc(sigs, func(s probe.Signature) bool { return s.Type == skip })
	if len(sigs) > 0 && !force {
		return nil, fmt.Errorf("%s carries %s; %w", m.Path, probe.Describe(sigs), ErrSignature)
	}
	return sigs, nil
}

// wipeSignatures erases the signatures found on m (a forced overwrite),
// so that neither this check nor blkid, udev or mount take the device for
// what it held: the magic bytes of each, and the whole first
// SuperblockOffset bytes (unused by ublk-raid) when one lies there.
// Call it once every check passed, before the superblock is written.
func wipeSignatures(m *Member, sigs signatures) error {
	lb := int64(max(m.LogicalBlock, 512))
	for _, s := range sigs {
		off, n := s.Offset, int64(s.Length)
		if off < engine.SuperblockOffset {
			off, n = 0, engine.SuperblockOffset
		}
		if off < 0 || n <= 0 || off+n > m.Size {
			continue // not on the device (probe reads only within it)
		}
		start, end := off&^(lb-1), (off+n+lb-1)&^(lb-1)
		if end > m.Size {
			// A file whose size is not a multiple of the block: a plain
			// write of the bytes themselves.
			if u := m.undo.Load(); u != nil {
				if err := u.saveFile(m, off, n); err != nil {
					return fmt.Errorf("erasing %s on %s: %w", s.Type, m.Path, err)
				}
			}
			if err := zeroTail(m.Path, off, n); err != nil {
				return fmt.Errorf("erasing %s on %s: %w", s.Type, m.Path, err)
			}
			continue
		}
		buf := make([]byte, end-start)
		if _, err := (memberReader{m}).ReadAt(buf, start); err != nil {
			return fmt.Errorf("erasing %s on %s: %w", s.Type, m.Path, err)
		}
		clear(buf[off-start : off-start+n])
		if err := m.WriteBlockSync(start, buf); err != nil {
			return fmt.Errorf("erasing %s on %s: %w", s.Type, m.Path, err)
		}
	}
	return nil
}

// zeroTail writes n zero bytes at off of the regular file at path.
func zeroTail(path string, off, n int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		return err
	}
	return f.Sync()
}

// memberReader reads a member opened O_DIRECT at any offset: whole
// aligned blocks around the range, within the device.
type memberReader struct{ m *Member }

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
	var got int
	if fd := r.m.Fd(); fd >= 0 {
		// A file may end short of the block: the read is short then.
		if got, err = unix.Pread(fd, buf, start); err != nil {
			return 0, fmt.Errorf("read %s at %d: %w", r.m.Path, start, err)
		}
	} else {
		if err := r.m.ReadAt(buf, start); err != nil {
			return 0, err
		}
		got = len(buf)
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

// heldAs names the device the array holds now (a spare, or a member in a
// role) whose superblock has member UUID u, or "".
func (a *Array) heldAs(u [16]byte) string {
	if u == ([16]byte{}) {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, sp := range a.spares {
		if sp.uuid == u {
			return fmt.Sprintf("spare %s", sp.m.Path)
		}
	}
	for r, sb := range a.SBs {
		if sb != nil && a.Members[r] != nil && sb.MemberUUID == u {
			return fmt.Sprintf("role %d (%s)", r, a.Members[r].Path)
		}
	}
	return ""
}

// checkNewDevice refuses a device that is to be written as a new member
// or spare of the array whose superblock is ref when it carries the
// superblock of another array, of a member of this one (re-add's job),
// or a signature of data; force overrides all of them. A spare of this
// array that was let go is taken as blank. Reads only.
func (a *Array) checkNewDevice(m *Member, ref *engine.Superblock, force bool) (signatures, error) {
	if ref == nil {
		return nil, errors.New("the array has no superblock to compare with")
	}
	var old *engine.Superblock
	if sb, _, err := engine.ReadSuperblock(m.ReadBlock, m.Size); err == nil {
		old = sb
	}
	switch {
	case old == nil:
	case old.ArrayUUID != ref.ArrayUUID && a.taken != nil:
		// A member of an array kept elsewhere (the daemon's, served or
		// waiting in its state file): not even with force.
		if err := a.taken(engine.UUIDString(old.ArrayUUID), &old.MemberUUID); err != nil {
			return nil, fmt.Errorf("%s carries a superblock of array %s (name %q): %w", m.Path, engine.UUIDString(old.ArrayUUID), old.Name, err)
		}
	case old.ArrayUUID == ref.ArrayUUID:
		// The device the array holds, as a spare or in a role, under
		// another path (a second node of one disk: multipath without
		// dm-multipath, a loop device over a member file): the same
		// storage would hold two places. Not even with force (a dd copy
		// of the device is wiped first to be used as new).
		if held := a.heldAs(old.MemberUUID); held != "" {
			return nil, fmt.Errorf("%s is %s of this array already (another path to the same device, or a copy of it: wipe a copy first)", m.Path, held)
		}
	}
	if old != nil && !force {
		switch {
		case old.ArrayUUID != ref.ArrayUUID:
			return nil, fmt.Errorf("%s carries a superblock of array %s (name %q); %w",
				m.Path, engine.UUIDString(old.ArrayUUID), old.Name, ErrSignature)
		case !old.IsSpare():
			return nil, fmt.Errorf("%s was role %d of this array: use re-add (--force overwrites it as a new device)", m.Path, old.Role)
		}
		// A spare of this array let go: its superblock is no data, but
		// what was put on the device since may be (an MBR partition
		// table leaves it in place).
		return checkBlankBut(m, false, ublkRaidSignature)
	}
	return checkBlank(m, force)
}
