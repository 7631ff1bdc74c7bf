package ublk

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCommitResult(t *testing.T) {
	rw := &Request{Op: IOOpWrite, Sectors: 16}
	rd := &Request{Op: IOOpRead, Sectors: 1}
	fl := &Request{Op: IOOpFlush}
	for _, tc := range []struct {
		req  *Request
		err  error
		want int32
	}{
		{rw, nil, 8192},
		{rd, nil, 512},
		{fl, nil, 0},
		{rw, unix.EIO, -int32(unix.EIO)},
		{rw, fmt.Errorf("member 2: %w", unix.ENOSPC), -int32(unix.ENOSPC)},
		{rw, unix.EAGAIN, -int32(unix.EIO)}, // never -EAGAIN
		{rw, ErrShortIO, -int32(unix.EIO)},  // not an errno
		{rw, errors.New("whatever"), -int32(unix.EIO)},
		{fl, unix.EOPNOTSUPP, -int32(unix.EOPNOTSUPP)},
		{rw, Errno(-5), -5},
	} {
		if got := commitResult(tc.req, tc.err); got != tc.want {
			t.Errorf("commitResult(op %d, %v) = %d, want %d", tc.req.Op, tc.err, got, tc.want)
		}
	}
	if Errno(0) != nil || Errno(7) != nil {
		t.Error("Errno of a non-negative result must be nil")
	}
	if n := testing.AllocsPerRun(100, func() { _ = commitResult(rw, Errno(-5)) }); n != 0 {
		t.Errorf("mapping a CQE error allocates %v times", n)
	}
}
