package ublk

import (
	"testing"

	"golang.org/x/sys/unix"
)

// ptHarness drives a passthrough queue handler on a ring that is never
// submitted: the test reads the SQEs the handler queues and feeds it the
// completions.
type ptHarness struct {
	t *testing.T
	q *Queue
	h *ptQueue
}

func newPTHarness(t *testing.T, m *Member) *ptHarness {
	t.Helper()
	const depth, maxIO = 4, 1 << 16
	q := &Queue{depth: depth, maxIO: maxIO, ring: newTestRing(t, 16, RingOptions{}), charFd: -1,
		state: make([]uint8, depth), reqs: make([]Request, depth), bufMem: make([]byte, depth*maxIO),
		bufIdx: []int{0, 1, 2, 3}, nbuf: depth}
	for i := range q.reqs {
		q.reqs[i].Tag = uint16(i)
		q.reqs[i].Buf = q.buf(i)
	}
	qh, err := NewPassthrough(m).NewQueue(q)
	if err != nil {
		t.Fatal(err)
	}
	return &ptHarness{t: t, q: q, h: qh.(*ptQueue)}
}

// handle delivers a request on tag 0.
func (p *ptHarness) handle(op uint8, flags uint32, sector uint64, sectors uint32) {
	r := &p.q.reqs[0]
	r.Op, r.Flags, r.Sector, r.Sectors = op, flags, sector, sectors
	p.q.state[0] = tagServing
	p.h.Handle(r)
}

// last is the SQE queued last, and whether it is a target SQE (not the
// commit of a request).
func (p *ptHarness) last() *SQE {
	r := p.q.ring
	return &r.sqes[((r.tail-1)&r.sqMask)<<r.sqeShift]
}

// committed is the result committed for tag 0, if it was.
func (p *ptHarness) committed() (int32, bool) {
	if p.q.state[0] != tagFetched {
		return 0, false
	}
	return (*ublksrvIOCmd)(p.last().cmdArea()).Result, true
}

func testMember(size int64) *Member {
	return &Member{MemberProps: MemberProps{Size: size, BlockDevice: true, LogicalBlock: 512, PhysicalBlock: 4096,
		VolatileCache: true, WriteZeroes: true}}
}

// A short member transfer is resumed where it stopped, FUA and all, and
// only the whole transfer commits the request's byte count.
func TestPassthroughResumesShortTransfer(t *testing.T) {
	p := newPTHarness(t, testMember(1<<20))
	p.handle(IOOpWrite, IOFlagFUA, 8, 8)
	s := p.last()
	if s.Opcode != OpWrite || s.Off != 8<<9 || s.Len != 4096 || s.OpFlags != RWFDsync {
		t.Fatalf("first SQE: op %d off %d len %d flags %#x", s.Opcode, s.Off, s.Len, s.OpFlags)
	}
	p.h.OnCompletion(0, 1024)
	if _, ok := p.committed(); ok {
		t.Fatal("a short write committed the request")
	}
	s = p.last()
	if s.Off != 8<<9+1024 || s.Len != 3072 || s.OpFlags != RWFDsync {
		t.Fatalf("resumed SQE: off %d len %d flags %#x", s.Off, s.Len, s.OpFlags)
	}
	p.h.OnCompletion(0, 3072)
	if res, ok := p.committed(); !ok || res != 4096 {
		t.Fatalf("committed %d (%v), want 4096", res, ok)
	}
}

// Operations the passthrough does not serve (zone operations, say) fail
// with EOPNOTSUPP at once.
func TestPassthroughUnknownOp(t *testing.T) {
	for _, op := range []uint8{IOOpWriteSame, 10, 11, 12, 13, 18, 22, 34} {
		p := newPTHarness(t, testMember(1<<20))
		p.handle(op, 0, 0, 8)
		if res, ok := p.committed(); !ok || res != -int32(unix.EOPNOTSUPP) {
			t.Errorf("op %d: committed %d (%v), want -EOPNOTSUPP", op, res, ok)
		}
	}
}

// Recover serves a device with the parameters its first member gave it:
// a member that cannot hold all its sectors or take its block size is
// refused before the device is touched.
func TestPassthroughCheckDevice(t *testing.T) {
	m := testMember(1 << 30)
	p := NewPassthrough(m)
	own := p.Params()
	if err := p.CheckDevice(own); err != nil {
		t.Fatalf("its own parameters: %v", err)
	}
	smaller := own
	smaller.Basic.DevSectors /= 2
	if err := p.CheckDevice(smaller); err != nil {
		t.Fatalf("a device smaller than the member: %v", err)
	}
	bigger := own
	bigger.Basic.DevSectors *= 2
	if err := p.CheckDevice(bigger); err == nil {
		t.Error("a device larger than the member accepted")
	}
	m4k := testMember(1 << 30)
	m4k.LogicalBlock = 4096
	if err := NewPassthrough(m4k).CheckDevice(own); err == nil {
		t.Error("a 512-byte-block device accepted for a member of 4096-byte blocks")
	}
	var _ DeviceChecker = p
}

// Zero-copy member I/O reads and writes the request's own pages with
// O_DIRECT: the device must ask user buffers to be aligned as the member
// takes them (its logical block, at least 512), not the driver's 4 bytes.
func TestPassthroughDMAAlignment(t *testing.T) {
	for lbs, want := range map[int]uint32{512: 511, 4096: 4095} {
		m := testMember(1 << 30)
		m.LogicalBlock = lbs
		p := NewPassthrough(m).Params()
		if p.Types&ParamTypeDMAAlign == 0 || p.DMA.Alignment != want {
			t.Errorf("logical block %d: types %#x dma alignment %d; want the DMA_ALIGN type, %d", lbs, p.Types, p.DMA.Alignment, want)
		}
	}
}
