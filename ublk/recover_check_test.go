package ublk

import (
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fakeControl is a Control whose commands never reach a ublk driver (the
// host has none): each control SQE is answered here, GET_DEV_INFO with
// info and GET_PARAMS with params written into the command buffer, and
// then goes to the real io_uring as a NOP carrying the same user data,
// so Control.do runs unchanged.
func fakeControl(t *testing.T, info DevInfo, params Params) *Control {
	t.Helper()
	return fakeControlAnswering(t, info, params, nil)
}

// fakeControlAnswering is fakeControl that also takes the commands in
// answers (by op), completing each with the errno answers[op] holds at
// the time (0: success); a test may change the map between commands.
func fakeControlAnswering(t *testing.T, info DevInfo, params Params, answers map[uint32]unix.Errno) *Control {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	c := &Control{f: f, Timeout: 5 * time.Second}
	t.Cleanup(func() { c.Close() })
	cr, err := c.getRing()
	if err != nil {
		t.Fatal(err)
	}
	r, real := cr.r, cr.r.sysEnter
	errnos := map[uint64]unix.Errno{} // user data of a NOP -> its answer
	r.sysEnter = func(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, unix.Errno) {
		for i := r.sqHead.Load(); i != r.sqTail.Load(); i++ {
			s := &r.sqes[(i&r.sqMask)<<r.sqeShift]
			if s.Opcode != OpURingCmd {
				continue
			}
			ud := s.UserData
			switch op := uint32(s.Off); {
			case op == cmdGetDevInfo:
				copy(cr.buf, asBytes(&info))
			case op == cmdGetParams:
				copy(cr.buf, asBytes(&params))
			default:
				if errno, ok := answers[op]; ok {
					errnos[ud] = errno
					break
				}
				t.Errorf("unexpected control command %#x", op)
			}
			*s = SQE{}
			PrepNop(s, ud)
		}
		n, errno := real(fd, toSubmit, minComplete, flags, arg, argSize)
		// The NOPs completed: give those standing for answers theirs.
		for i := r.cqHead.Load(); i != r.cqTail.Load(); i++ {
			c := &r.cqes[i&r.cqMask]
			if e, ok := errnos[c.UserData]; ok {
				c.Res = -int32(e)
				delete(errnos, c.UserData)
			}
		}
		return n, errno
	}
	c.putRing(cr)
	return c
}

type nopTarget struct{}

func (nopTarget) Files() []int                          { return nil }
func (nopTarget) NewQueue(*Queue) (QueueHandler, error) { return &hungHandler{}, nil }

// deadServerDevice is a device whose server died: quiesced, waiting for
// a new one, with the flags this package creates devices with and the
// ones the kernel adds by itself (6.16+, 7.0+).
func deadServerDevice() DevInfo {
	return DevInfo{NrHwQueues: 1, QueueDepth: 64, State: StateQuiesced, MaxIOBufBytes: 512 << 10, DevID: 7,
		UblksrvPid: -1, Pad0: ioDescSize,
		Flags: flagsRequiredByThisDaemon | FlagURingCmdCompInTask | FlagPerIODaemon | FlagBufRegOffDaemon | FlagSafeStopDev}
}

// The harness itself: a device as this package makes it is accepted.
func TestCheckRecoverAcceptsOwnDevice(t *testing.T) {
	if err := CheckRecover(fakeControl(t, deadServerDevice(), Params{}), 7, nopTarget{}); err != nil {
		t.Fatalf("CheckRecover of a device as Create makes it: %v", err)
	}
}

// Found by review. A device found with a feature that changes the queue protocol in a way
// this server does not speak (made by another ublk server, or by a later
// version) cannot be served: Recover must refuse it before anything is
// written, as it refuses a zero-copy device for a copy-only target.
// Serving it anyway reads every descriptor but tag 0's at the wrong place
// (IO_DESC_SIZE: member I/O at wrong sectors), gets FETCHes refused
// with EINVAL and END_USER_RECOVERY waiting for queues that never get
// ready (USER_COPY, SUPPORT_ZERO_COPY: the FETCH must carry no buffer),
// or fails the queue at the first write (NEED_GET_DATA's res 1).
func TestCheckRecoverRefusesFeaturesThisServerCannotServe(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag uint64
		desc uint16
	}{
		{"io_desc_size", FlagIODescSize, 64},
		{"need_get_data", FlagNeedGetData, ioDescSize},
		{"user_copy", FlagUserCopy, ioDescSize},
		{"support_zero_copy", FlagSupportZeroCopy, ioDescSize},
		{"zoned", FlagZoned | FlagUserCopy, ioDescSize},
		{"integrity", FlagIntegrity | FlagUserCopy, ioDescSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := deadServerDevice()
			info.Flags |= tc.flag
			info.Pad0 = tc.desc // io_desc_size in 7.3
			if err := CheckRecover(fakeControl(t, info, Params{}), 7, nopTarget{}); err == nil {
				t.Fatalf("CheckRecover accepts a device with %v (io_desc_size %d): Recover would serve it with the plain protocol",
					FlagNames(tc.flag), tc.desc)
			}
		})
	}
}

// Found by review. A stopped device (STOP_DEV done, DEL_DEV not: a server killed between
// the two, or before START_DEV) is dead, not waiting for a server: the
// kernel answers START_USER_RECOVERY with EBUSY for good, so Recover
// retries for RecoveryWait and then fails "device or resource busy",
// after the caller, told by CheckRecover that all is well, has already
// marked the array dirty.
func TestCheckRecoverRefusesStoppedDevice(t *testing.T) {
	info := deadServerDevice()
	info.State = StateDead
	if err := CheckRecover(fakeControl(t, info, Params{}), 7, nopTarget{}); err == nil {
		t.Fatal("CheckRecover accepts a stopped (DEAD) device, which START_USER_RECOVERY refuses with EBUSY")
	}
}

// The queues of a recovered device are set up from its info (queues,
// depth, I/O buffer size): values past what Config.Validate lets a new
// device have (a foreign device, or a corrupt answer) are refused rather
// than mapped (a huge buffer per tag).
func TestCheckRecoverBoundsDeviceShape(t *testing.T) {
	for name, change := range map[string]func(*DevInfo){
		"no queues":       func(i *DevInfo) { i.NrHwQueues = 0 },
		"deep queues":     func(i *DevInfo) { i.QueueDepth = maxQueueDepth + 1 },
		"huge buffers":    func(i *DevInfo) { i.MaxIOBufBytes = 1 << 30 },
		"odd buffers":     func(i *DevInfo) { i.MaxIOBufBytes = 4096 + 512 },
		"too many queues": func(i *DevInfo) { i.NrHwQueues = maxNrQueues + 1 },
	} {
		info := deadServerDevice()
		change(&info)
		if err := CheckRecover(fakeControl(t, info, Params{}), 7, nopTarget{}); err == nil {
			t.Errorf("%s: CheckRecover accepts %d queues of depth %d, %d-byte buffers", name, info.NrHwQueues, info.QueueDepth, info.MaxIOBufBytes)
		}
	}
}
