package array

import (
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// markFailed writes to m, the device of role (own: its superblock, copied
// before the failure: a spare may take the role meanwhile), which was just
// failed by hand and whose failure the other members' superblocks now
// record, that generation's superblock with its own role faulty. Assembled
// alone later (the others not given), it is then known failed and refused without
// --force (engine.ErrFailedMember), where its old superblock, which still
// said it was active, would start the array from its stale data. md has
// the same hole (a failed member's superblock is not written); a member
// failed by the array for I/O errors or a timeout is not written either,
// as it may not take writes or may hang.
//
// Best effort: an error changes nothing (the member is failed already).
// The write holds a reference on the file, so a close of the member
// meanwhile (its removal, or a spare taking the role) cannot hand its
// descriptor to another file under the write. A member that hangs (the
// disk an operator fails first) is left behind after markFailedWait, or
// the member timeout if shorter, never waited for without end (a member
// timeout of 0): md's fail does no I/O to the failed device, and the
// caller (the daemon, under the array's operation lock) must not wait on
// it. The write stays out as late I/O on the device (writeAll), so the
// device is not removed nor added back until it answers.
func (a *Array) markFailed(role int, m *Member, own *engine.Superblock) {
	a.mu.Lock()
	var ref *engine.Superblock
	for r, s := range a.SBs {
		if r != role && s != nil && s.Events == a.events {
			ref = s
			break
		}
	}
	if ref == nil {
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
	wait := markFailedWait
	if t := a.MemberTimeout; t > 0 && t < wait {
		wait = t
	}
	// Out on the device until it returns, given up or not (Member.busy):
	// a spare taking the role meanwhile must not close the device under
	// it (closeWhenAnswered), nor remove free it.
	m.jobOut.Add(1)
	writeAll([]*Member{m}, []int{0}, wait, func(int) error {
		defer m.jobOut.Add(-1)
		return writeMarked(m, b)
	})
}

// markFailedWait bounds how long markFailed waits for the failed member's
// write: a device that takes writes answers in moments.
const markFailedWait = 2 * time.Second

// writeMarked writes superblock block b to m durably (the device holds a
// reference on its file for the call).
func writeMarked(m *Member, b []byte) error {
	return writeSB(m, b)
}
