package ublk

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Passthrough serves a device that maps 1:1 onto one member. It proves the
// data path (member I/O on the queue ring, FLUSH, FUA, DISCARD,
// WRITE_ZEROES) before RAID lands.
type Passthrough struct {
	m *Member
}

// NewPassthrough makes a passthrough target over m.
func NewPassthrough(m *Member) *Passthrough { return &Passthrough{m: m} }

// Params derives the device parameters from the member: same size and
// block sizes; VOLATILE_CACHE|FUA only when the member has a volatile
// cache (FLUSH then becomes fdatasync of the member, which reaches it);
// DISCARD only where the member can discard; WRITE_ZEROES always (the
// kernel zeroes a block device range itself when it has no offload).
func (p *Passthrough) Params() Params {
	m := p.m
	var pr Params
	pr.Types = ParamTypeBasic | ParamTypeDiscard
	b := &pr.Basic
	b.LogicalBSShift = log2(m.LogicalBlock)
	b.PhysicalBSShift = log2(m.PhysicalBlock)
	b.IOMinShift = log2(max(m.IOMin, m.PhysicalBlock))
	if isPow2(m.IOOpt) {
		b.IOOptShift = log2(m.IOOpt)
	}
	b.DevSectors = uint64(m.Size/int64(m.LogicalBlock)*int64(m.LogicalBlock)) >> 9
	pr.AlignDMA(m.LogicalBlock)
	if m.VolatileCache {
		b.Attrs |= AttrVolatileCache | AttrFUA
	}
	if m.Rotational {
		b.Attrs |= AttrRotational
	}
	if m.ReadOnly {
		// As loop and dm over a read-only backing device: not offered
		// writable only to fail every write.
		b.Attrs |= AttrReadOnly
	}
	d := &pr.Discard
	if m.WriteZeroes {
		d.MaxWriteZeroesSectors = 1 << 21 // 1 GiB per request
	}
	d.DiscardGranularity = uint32(max(m.LogicalBlock, 4096))
	if m.Discard {
		d.DiscardGranularity = uint32(max(m.DiscardGranularity, m.LogicalBlock))
		d.MaxDiscardSectors = 1 << 21
		d.MaxDiscardSegments = 1
	}
	return pr
}

// CheckDevice implements DeviceChecker: a recovered device keeps the
// parameters its first member gave it, which the member serving it now
// must take (ServesDevice).
func (p *Passthrough) CheckDevice(dev Params) error {
	if err := ServesDevice(dev, p.Params()); err != nil {
		return fmt.Errorf("member %s: %w", p.m.Path, err)
	}
	return nil
}

// Files implements Target.
func (p *Passthrough) Files() []int { return []int{p.m.Fd()} }

// ZeroCopy implements ZeroCopyTarget: member reads and writes use the
// request's own pages when the queue is zero copy.
func (p *Passthrough) ZeroCopy() bool { return true }

// NewQueue implements Target.
func (p *Passthrough) NewQueue(q *Queue) (QueueHandler, error) {
	return &ptQueue{q: q, m: p.m, reqs: make([]*Request, q.Depth()), done: make([]int, q.Depth())}, nil
}

type ptQueue struct {
	q    *Queue
	m    *Member
	reqs []*Request
	done []int // bytes transferred so far, per tag (short transfers are resumed); a write-zeroes's flush sent
}

const memberFile = FirstTargetFile

func (h *ptQueue) Handle(req *Request) {
	h.reqs[req.Tag] = req
	h.done[req.Tag] = 0
	switch req.Op {
	case IOOpRead, IOOpWrite:
		h.submitRW(req)
	case IOOpFlush:
		s, err := h.q.SQE(uint64(req.Tag))
		if err != nil {
			h.q.Complete(req.Tag, err)
			return
		}
		PrepFsync(s, memberFile, FsyncDatasync, s.UserData)
	case IOOpDiscard:
		if !h.m.Discard {
			h.q.Complete(req.Tag, unix.EOPNOTSUPP)
			return
		}
		s, err := h.q.SQE(uint64(req.Tag))
		if err != nil {
			h.q.Complete(req.Tag, err)
			return
		}
		if h.m.BlockDevice {
			PrepBlockDiscard(s, memberFile, req.Offset(), uint64(req.Bytes()), s.UserData)
		} else {
			PrepFallocate(s, memberFile, FallocPunchHole|FallocKeepSize, req.Offset(), uint64(req.Bytes()), s.UserData)
		}
	case IOOpWriteZeroes:
		s, err := h.q.SQE(uint64(req.Tag))
		if err != nil {
			h.q.Complete(req.Tag, err)
			return
		}
		mode := uint32(FallocZeroRange)
		if !h.m.BlockDevice {
			mode |= FallocKeepSize
		}
		PrepFallocate(s, memberFile, mode, req.Offset(), uint64(req.Bytes()), s.UserData)
	default:
		h.q.Complete(req.Tag, unix.EOPNOTSUPP)
	}
}

func (h *ptQueue) submitRW(req *Request) {
	s, err := h.q.SQE(uint64(req.Tag))
	if err != nil {
		h.q.Complete(req.Tag, err)
		return
	}
	done := h.done[req.Tag]
	ud := s.UserData
	if h.q.ZeroCopy() {
		op := OpReadFixed
		if req.Op == IOOpWrite {
			op = OpWriteFixed
		}
		PrepRWSlot(s, op, memberFile, req.Tag, uint64(done), uint32(req.Bytes()-done), req.Offset()+uint64(done), ud)
	} else {
		buf := req.Data()[done:]
		op := OpRead
		switch {
		case req.Op == IOOpWrite && h.q.FixedBuffers():
			op = OpWriteFixed
		case req.Op == IOOpWrite:
			op = OpWrite
		case h.q.FixedBuffers():
			op = OpReadFixed
		}
		PrepRW(s, op, memberFile, buf, req.Offset()+uint64(done), ud)
	}
	if req.Op == IOOpWrite && req.Flags&IOFlagFUA != 0 {
		s.OpFlags = RWFDsync // durable before completion: FUA on the member, or write+flush
	}
}

func (h *ptQueue) OnCompletion(userData uint64, res int32) {
	tag := uint16(userData)
	req := h.reqs[tag]
	if res < 0 {
		h.q.Complete(tag, Errno(res))
		return
	}
	if req.Op == IOOpRead || req.Op == IOOpWrite {
		if res == 0 {
			h.q.Complete(tag, ErrShortIO)
			return
		}
		h.done[tag] += int(res)
		if h.done[tag] < req.Bytes() {
			h.submitRW(req) // resume a short transfer
			return
		}
	}
	if req.Op == IOOpWriteZeroes && req.Flags&IOFlagFUA != 0 && h.done[tag] == 0 {
		// FUA: durable when completed. The zeroing (fallocate) has no
		// FUA form, so a flush follows it (done marks it sent), as the
		// block layer does for a device without FUA.
		s, err := h.q.SQE(uint64(tag))
		if err != nil {
			h.q.Complete(tag, err)
			return
		}
		h.done[tag] = 1
		PrepFsync(s, memberFile, FsyncDatasync, s.UserData)
		return
	}
	h.q.Complete(tag, nil)
}

func (h *ptQueue) Close() {}
