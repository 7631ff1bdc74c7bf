package ublk

import "testing"

// Found by review (run): a passthrough over a read-only member must be read-only
// (Passthrough.Params sets UBLK_ATTR_READ_ONLY, commit b179a77: advertised
// writable, every write the kernel sends fails with EPERM from the member).
// A recovered device keeps the parameters it was made with, so `recover
// -n N MEMBER` over a member that became read-only since the device was
// made (blockdev --setro, a write-protected namespace) must be refused by
// the check that refuses every other parameter the member cannot serve
// (ServesDevice): accepted, the device stays advertised writable and a
// mounted filesystem's writes fail after the hand-over.
func TestReviewRunRecoverWritableDeviceOverReadOnlyMember(t *testing.T) {
	m := testMember(1 << 30)
	dev := NewPassthrough(m).Params() // made while the member was writable
	m.ReadOnly = true                 // now read-only
	p := NewPassthrough(m)
	if p.Params().Basic.Attrs&AttrReadOnly == 0 {
		t.Fatal("harness: a read-only member's own parameters are not read-only")
	}
	if err := CheckRecover(fakeControl(t, deadServerDevice(), dev), 7, p); err == nil {
		t.Fatalf("CheckRecover accepts a writable device (attrs %#x) over a read-only member (own attrs %#x): every write after the hand-over fails with EPERM",
			dev.Basic.Attrs, p.Params().Basic.Attrs)
	}
}
