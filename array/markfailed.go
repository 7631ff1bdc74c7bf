package array

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// markFailed writes to m, the device of role, which was just failed by
// hand and whose failure the other members' superblocks now record, that
// generation's superblock with its own role faulty. Assembled alone later
// (the others not given), it is then known failed and refused without
// --force (engine.ErrFailedMember), where its old superblock, which still
// said it was active, would start the array from its stale data. md has
// the same hole (a failed member's superblock is not written); a member
// failed by the array for I/O errors or a timeout is not written either,
// as it may not take writes or may hang.
//
// Best effort: an error changes nothing (the member is failed already).
// The write holds a reference on the file, so a close of the member
// meanwhile (its removal, or a spare taking the role) cannot hand its
// descriptor to another file under the write; a member that hangs is
// left behind after the member timeout.
func (a *Array) markFailed(role int, m *ublk.Member) {
	a.mu.Lock()
	own := a.SBs[role]
	var ref *engine.Superblock
	for r, s := range a.SBs {
		if r != role && s != nil && s.Events == a.events {
			ref = s
			break
		}
	}
	if own == nil || ref == nil {
		a.mu.Unlock()
		return
	}
	sb := *ref
	a.mu.Unlock()
	if e := sb.Roles[role]; e.State != engine.RoleFaulty || e.Member != own.MemberUUID {
		return // the role changed hands meanwhile
	}
	sb.Role, sb.MemberUUID, sb.DataSectors = uint32(role), own.MemberUUID, own.DataSectors
	b, err := sb.MarshalBinary()
	if err != nil {
		return
	}
	writeAll([]*ublk.Member{m}, []int{0}, a.MemberTimeout, func(int) error { return writeMarked(m, b) })
}

// writeMarked writes superblock block b to m durably, through a
// reference on its file.
func writeMarked(m *ublk.Member, b []byte) error {
	rc, err := m.File.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := rc.Control(func(fd uintptr) {
		buf, err := unix.Mmap(-1, 0, len(b), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			werr = err
			return
		}
		defer unix.Munmap(buf)
		copy(buf, b) // page-aligned, for O_DIRECT
		if n, err := unix.Pwrite(int(fd), buf, engine.SuperblockOffset); err != nil || n != len(buf) {
			werr = fmt.Errorf("write %s: %d of %d bytes: %v", m.Path, n, len(buf), err)
			return
		}
		werr = unix.Fdatasync(int(fd))
	}); err != nil {
		return err
	}
	return werr
}
