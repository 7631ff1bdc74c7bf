package ublk

import "testing"

// Found by review: a passthrough device is a 1:1 map of its member, "same
// size and block sizes" (Passthrough.Params). Over a read-only member
// (blockdev --setro, a write-protected namespace: BLKROGET, probed into
// MemberProps.ReadOnly) the device must say it is read-only
// (UBLK_ATTR_READ_ONLY), as loop and dm do over a read-only backing
// device: advertised writable, every write the kernel sends it (a
// mount, mkfs, the page cache's writeback) fails with EPERM from the
// member, after the filesystem took it for a writable disk.
func TestReviewZCPassthroughReadOnlyMember(t *testing.T) {
	m := testMember(1 << 30)
	m.ReadOnly = true
	p := NewPassthrough(m).Params()
	if p.Basic.Attrs&AttrReadOnly == 0 {
		t.Fatalf("passthrough of a read-only member: attrs %#x, want UBLK_ATTR_READ_ONLY (%#x): the device is advertised writable and fails every write", p.Basic.Attrs, AttrReadOnly)
	}
}
