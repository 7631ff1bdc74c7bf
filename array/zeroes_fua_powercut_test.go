package array

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// zfRing runs fakeRing's pending member operations on the memdev
// members, as the io_uring SQEs of SubmitMember would: a FUA write is
// durable (RWF_DSYNC), a write-zeroes is a fallocate (no FUA form), a
// flush an fdatasync; zfRun delivers each result as the CQE would (a
// failed operation's errno as -errno).
type zfOp struct {
	fakeOp
	off uint64
}

type zfRing struct {
	fakeRing
	ops []zfOp
}

func (r *zfRing) SubmitMember(ud uint64, tag uint16, m *Member, fixed bool, io engine.MemberIO, off uint64, data []byte) error {
	r.ops = append(r.ops, zfOp{fakeOp{ud, io, data, m}, off})
	return nil
}

func newZfRing() *zfRing {
	return &zfRing{fakeRing: fakeRing{now: time.Unix(1000, 0), done: map[uint16]error{}}}
}

func zfRun(t *testing.T, h *queue, r *zfRing) {
	t.Helper()
	for len(r.ops) > 0 {
		o := r.ops[0]
		r.ops = r.ops[1:]
		dev := o.m.Device.(*memdev.Dev)
		off := int64(o.off)
		n := int64(o.io.Sectors) << 9
		var err error
		res := int32(0)
		switch o.io.Kind {
		case engine.IOWrite:
			if o.io.FUA {
				err = dev.WriteAtDurable(o.data, off)
			} else {
				err = dev.WriteAt(o.data, off)
			}
			res = int32(n)
		case engine.IOWriteZeroes:
			err = dev.WriteZeroes(off, n)
		case engine.IODiscard:
			err = dev.Discard(off, n)
		case engine.IOFlush:
			err = dev.Flush()
		case engine.IORead:
			err = dev.ReadAt(o.data, off)
			res = int32(n)
		}
		if err != nil {
			// A device's errno (an injected fault, a refusal) is the
			// operation's result, as the ring gives it; anything else
			// is the test's own failure.
			var errno unix.Errno
			if !errors.As(err, &errno) {
				t.Fatalf("member op %+v: %v", o.io, err)
			}
			res = -int32(errno)
		}
		h.OnCompletion(o.ud, res)
	}
}

// Found by review: a WRITE_ZEROES with FUA (UBLK_IO_F_FUA; md keeps
// REQ_FUA on a write-zeroes's member bios) is acknowledged, then the
// power fails: the range must read zeroes from every copy. The executor
// dropped the FUA and issued no flush, so the zeroes were only in the
// members' caches and the old data came back.
func TestWriteZeroesFUASurvivesPowerCut(t *testing.T) {
	rack, paths, _, a := servedMirror(t)
	off := int64(a.dataOffset) + 1024<<9
	old := bytes.Repeat([]byte{0xa5}, 4096)
	for _, p := range paths {
		rack.Preload(rack.Disk(p), off, old)
	}
	r := newZfRing()
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWriteZeroes, Flags: ublk.IOFlagFUA, Sector: 1024, Sectors: 8})
	zfRun(t, h, r)
	if err, done := r.done[0]; !done || err != nil {
		t.Fatalf("write-zeroes FUA: done=%v err=%v", done, err)
	}
	rack.PowerCut()
	a.Close()
	for _, p := range paths {
		got := rack.Stable(rack.Disk(p), off, 4096)
		if !bytes.Equal(got, make([]byte, 4096)) {
			t.Errorf("%s after the power cut holds %#x at the range an acknowledged FUA write-zeroes zeroed", p, got[0])
		}
	}
}

// The harness's control: a FUA write survives the cut.
func TestWriteFUASurvivesPowerCut(t *testing.T) {
	rack, paths, _, a := servedMirror(t)
	off := int64(a.dataOffset) + 1024<<9
	r := newZfRing()
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Flags: ublk.IOFlagFUA, Sector: 1024, Sectors: 8, Buf: bytes.Repeat([]byte{0x3c}, 4096)})
	zfRun(t, h, r)
	if err, done := r.done[0]; !done || err != nil {
		t.Fatalf("write FUA: done=%v err=%v", done, err)
	}
	rack.PowerCut()
	a.Close()
	for _, p := range paths {
		if got := rack.Stable(rack.Disk(p), off, 4096); got[0] != 0x3c {
			t.Errorf("%s lost a FUA write: %#x", p, got[0])
		}
	}
}
