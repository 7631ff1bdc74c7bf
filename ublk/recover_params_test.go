package ublk

import "testing"

// Found by review (live upgrade): a recovered device keeps the parameters of the
// server that made it, and the block layer sends FLUSH and FUA only to a
// device whose parameters say it has a volatile cache. Recover (through
// the target's DeviceChecker, ServesDevice) accepted a device made without
// VOLATILE_CACHE|FUA for a target that needs them (a member with a
// write-back cache, a regular file): the new server was then never asked
// to flush, and an fsync acknowledged after the hand-over was not durable
// on the member.
func TestRecoverRefusesDeviceWithoutFlush(t *testing.T) {
	m := testMember(1 << 30) // VolatileCache: a write-back cache
	p := NewPassthrough(m)
	own := p.Params()
	if own.Basic.Attrs&AttrVolatileCache == 0 {
		t.Fatal("harness: the member's own parameters advertise no volatile cache")
	}
	dev := own
	dev.Basic.Attrs &^= AttrVolatileCache | AttrFUA // made over a write-through member
	if err := CheckRecover(fakeControl(t, deadServerDevice(), dev), 7, p); err == nil {
		t.Fatalf("CheckRecover accepts a device without VOLATILE_CACHE|FUA (attrs %#x) for a member with a write-back cache (attrs %#x): no FLUSH ever reaches it after the hand-over",
			dev.Basic.Attrs, own.Basic.Attrs)
	}
}

// Found by review (live upgrade): on a zero-copy device (AUTO_BUF_REG) member I/O
// moves the request's own pages with O_DIRECT, so the device must make
// users align their buffers as the member needs (DMA_ALIGN, commit
// 0c102cb): without it the driver lets them be 4-byte aligned, the member
// refuses such a request with EINVAL, and an array takes that EINVAL on a
// write as a member failure. A zero-copy device made without DMA_ALIGN (by
// a version before that commit, handed over to this one) was accepted by
// Recover, and its misaligned O_DIRECT users then got I/O errors (or
// degrade the array) after the hand-over.
func TestRecoverRefusesZeroCopyDeviceWithoutDMAAlign(t *testing.T) {
	m := testMember(1 << 30)
	p := NewPassthrough(m)
	own := p.Params()
	if own.Types&ParamTypeDMAAlign == 0 || own.DMA.Alignment != 511 {
		t.Fatalf("harness: own parameters types %#x dma alignment %d", own.Types, own.DMA.Alignment)
	}
	dev := own
	dev.Types &^= ParamTypeDMAAlign // the driver's default: dma_alignment 3
	dev.DMA.Alignment = 0
	info := deadServerDevice()
	info.Flags |= FlagAutoBufReg
	if err := CheckRecover(fakeControl(t, info, dev), 7, p); err == nil {
		t.Fatalf("CheckRecover accepts a zero-copy device without DMA_ALIGN (types %#x) for a member that needs %d-byte aligned O_DIRECT buffers",
			dev.Types, own.DMA.Alignment+1)
	}
}
