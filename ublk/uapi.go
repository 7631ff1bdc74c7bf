package ublk

import "fmt"

// Kernel UAPI mirrored from the Linux 6.12 headers <linux/io_uring.h>,
// <linux/ublk_cmd.h> and <linux/blkdev.h>, plus the feature bits and
// commands of later kernels (up to 7.3) used where the driver offers them.
// Every struct names the kernel
// struct it mirrors; uapi_test.go asserts each size and field offset, and,
// where gcc and the headers are installed, checks them against the C
// compiler's view of the same headers.

// ---- io_uring ----

// ioUringParams mirrors struct io_uring_params.
type ioUringParams struct {
	SqEntries    uint32
	CqEntries    uint32
	Flags        uint32
	SqThreadCPU  uint32
	SqThreadIdle uint32
	Features     uint32
	WqFd         uint32
	Resv         [3]uint32
	SqOff        ioSqringOffsets
	CqOff        ioCqringOffsets
}

// ioSqringOffsets mirrors struct io_sqring_offsets.
type ioSqringOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Flags       uint32
	Dropped     uint32
	Array       uint32
	Resv1       uint32
	UserAddr    uint64
}

// ioCqringOffsets mirrors struct io_cqring_offsets.
type ioCqringOffsets struct {
	Head        uint32
	Tail        uint32
	RingMask    uint32
	RingEntries uint32
	Overflow    uint32
	Cqes        uint32
	Flags       uint32
	Resv1       uint32
	UserAddr    uint64
}

// SQE mirrors struct io_uring_sqe (64 bytes). On a ring created with
// IORING_SETUP_SQE128 each entry is followed by 64 more bytes of command
// data; Cmd covers the first 16 bytes of the command area (sqe->cmd), which
// is all a ublksrv_io_cmd needs.
type SQE struct {
	Opcode      uint8
	Flags       uint8
	IOPrio      uint16
	Fd          int32
	Off         uint64 // off / addr2 / {cmd_op, __pad1}
	Addr        uint64 // addr / splice_off_in
	Len         uint32
	OpFlags     uint32 // rw_flags, fsync_flags, timeout_flags, uring_cmd_flags ...
	UserData    uint64
	BufIndex    uint16 // buf_index / buf_group
	Personality uint16
	FileIndex   uint32 // splice_fd_in / file_index
	Addr3       uint64 // addr3; with Pad2 the start of cmd[]
	Pad2        uint64
}

// CQE mirrors struct io_uring_cqe (without the CQE32 extension).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// kernelTimespec mirrors struct __kernel_timespec, the operand of
// IORING_OP_TIMEOUT and IORING_OP_LINK_TIMEOUT.
type kernelTimespec struct {
	Sec  int64
	Nsec int64
}

// ioUringGeteventsArg mirrors struct io_uring_getevents_arg, the argument
// of io_uring_enter with IORING_ENTER_EXT_ARG.
type ioUringGeteventsArg struct {
	Sigmask   uint64
	SigmaskSz uint32
	MinWait   uint32 // min_wait_usec
	Ts        uint64
}

// ioUringFilesUpdate mirrors struct io_uring_files_update, the argument
// of IORING_REGISTER_FILES_UPDATE (Fds: address of an __s32 array, set
// for the call only).
type ioUringFilesUpdate struct {
	Offset uint32
	Resv   uint32
	Fds    uint64
}

// ioUringRsrcRegister mirrors struct io_uring_rsrc_register, the argument
// of IORING_REGISTER_BUFFERS2 (with rsrcRegSparse: Nr empty slots).
type ioUringRsrcRegister struct {
	Nr    uint32
	Flags uint32
	Resv2 uint64
	Data  uint64
	Tags  uint64
}

// autoBufRegAddr is struct ublk_auto_buf_reg {index, flags, reserved0,
// reserved1} as FETCH and COMMIT_AND_FETCH carry it in sqe->addr on a
// device with UBLK_F_AUTO_BUF_REG: the driver registers the request's
// pages in the issuing ring's buffer table at index before delivering
// the request, and unregisters them at its commit.
func autoBufRegAddr(index uint16, flags uint8) uint64 {
	return uint64(index) | uint64(flags)<<16
}

// autoBufRegFallback (UBLK_AUTO_BUF_REG_FALLBACK) would deliver a request
// whose registration failed with UBLK_IO_F_NEED_REG_BUF instead of
// failing it; unused: without a copy path the server could only fail it.
const autoBufRegFallback = 1 << 0

// io_uring_setup flags.
const (
	setupCQSize       = 1 << 3
	setupClamp        = 1 << 4
	setupSubmitAll    = 1 << 7
	setupCoopTaskrun  = 1 << 8
	setupTaskrunFlag  = 1 << 9
	setupSQE128       = 1 << 10
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13
	featSingleMmap    = 1 << 0
	featNoDrop        = 1 << 1
	enterGetEvents    = 1 << 0
	enterExtArg       = 1 << 3
	offSQRing         = 0
	offCQRing         = 0x8000000
	offSQEs           = 0x10000000
	registerBuffers   = 0
	registerBuffers2  = 15
	rsrcRegSparse     = 1 << 0
	registerFiles     = 2
	registerFilesUpd  = 6
	sqRingNeedWakeup  = 1 << 0
	sqRingCQOverflow  = 1 << 1
	sqRingTaskrun     = 1 << 2
)

// io_uring opcodes (enum io_uring_op) used by this project.
const (
	OpNop         uint8 = 0
	OpFsync       uint8 = 3
	OpReadFixed   uint8 = 4
	OpWriteFixed  uint8 = 5
	OpTimeout     uint8 = 11
	OpAsyncCancel uint8 = 14
	OpLinkTimeout uint8 = 15
	OpFallocate   uint8 = 17
	OpRead        uint8 = 22
	OpWrite       uint8 = 23
	OpURingCmd    uint8 = 46
)

// SQE flags (IOSQE_*).
const (
	SQEFixedFile      uint8 = 1 << 0
	SQEIODrain        uint8 = 1 << 1
	SQEIOLink         uint8 = 1 << 2
	SQEIOHardlink     uint8 = 1 << 3
	SQEAsync          uint8 = 1 << 4
	SQECQESkipSuccess uint8 = 1 << 6
)

// Per-opcode flags.
const (
	FsyncDatasync uint32 = 1 << 0 // IORING_FSYNC_DATASYNC
	RWFDsync      uint32 = 0x2    // RWF_DSYNC, in rw_flags
	RWFSync       uint32 = 0x4    // RWF_SYNC
)

// fallocate modes used for DISCARD and WRITE_ZEROES.
const (
	FallocKeepSize  = 0x01
	FallocPunchHole = 0x02
	FallocZeroRange = 0x10
)

// ---- ublk ----

// ublksrvCtrlCmd mirrors struct ublksrv_ctrl_cmd: the payload of a control
// command, carried in the 80-byte command area of a 128-byte SQE.
type ublksrvCtrlCmd struct {
	DevID      uint32
	QueueID    uint16
	Len        uint16
	Addr       uint64
	Data       [1]uint64
	DevPathLen uint16
	Pad        uint16
	Reserved   uint32
}

// DevInfo mirrors struct ublksrv_ctrl_dev_info.
type DevInfo struct {
	NrHwQueues    uint16
	QueueDepth    uint16
	State         uint16
	Pad0          uint16
	MaxIOBufBytes uint32
	DevID         uint32
	UblksrvPid    int32
	Pad1          uint32
	Flags         uint64
	UblksrvFlags  uint64
	OwnerUID      uint32
	OwnerGID      uint32
	Reserved1     uint64
	Reserved2     uint64
}

// ioDesc mirrors struct ublksrv_io_desc: one entry of a queue's descriptor
// array, written by the kernel and read by the server after a FETCH
// completes.
type ioDesc struct {
	OpFlags     uint32
	NrSectors   uint32 // nr_sectors / nr_zones
	StartSector uint64
	Addr        uint64
}

// ublksrvIOCmd mirrors struct ublksrv_io_cmd, the payload of FETCH and
// COMMIT_AND_FETCH, carried in sqe->cmd.
type ublksrvIOCmd struct {
	QID    uint16
	Tag    uint16
	Result int32
	Addr   uint64
}

// ParamBasic mirrors struct ublk_param_basic.
type ParamBasic struct {
	Attrs            uint32
	LogicalBSShift   uint8
	PhysicalBSShift  uint8
	IOOptShift       uint8
	IOMinShift       uint8
	MaxSectors       uint32
	ChunkSectors     uint32
	DevSectors       uint64
	VirtBoundaryMask uint64
}

// ParamDiscard mirrors struct ublk_param_discard.
type ParamDiscard struct {
	DiscardAlignment      uint32
	DiscardGranularity    uint32
	MaxDiscardSectors     uint32
	MaxWriteZeroesSectors uint32
	MaxDiscardSegments    uint16
	Reserved0             uint16
}

// ParamDevt mirrors struct ublk_param_devt (read-only, filled by the
// kernel once the device is started).
type ParamDevt struct {
	CharMajor uint32
	CharMinor uint32
	DiskMajor uint32
	DiskMinor uint32
}

// paramZoned mirrors struct ublk_param_zoned (never used; present so that
// Params has the kernel's length).
type paramZoned struct {
	MaxOpenZones         uint32
	MaxActiveZones       uint32
	MaxZoneAppendSectors uint32
	Reserved             [20]uint8
}

// ParamDMAAlign mirrors struct ublk_param_dma_align (Linux 6.14+).
type ParamDMAAlign struct {
	Alignment uint32 // mask: user buffers must be aligned to Alignment+1 bytes
	Pad       [4]uint8
}

// Params mirrors struct ublk_params, up to its dma member (6.14+; a 6.12
// driver takes the 6.12 prefix: it cuts the length to its own struct and
// clears the types it does not know).
type Params struct {
	Len     uint32
	Types   uint32
	Basic   ParamBasic
	Discard ParamDiscard
	Devt    ParamDevt
	zoned   paramZoned
	DMA     ParamDMAAlign
}

// AlignDMA asks that user buffers be aligned to the logical block of the
// members, lbs bytes (at least 512), where the driver takes the request
// (6.14+). On a zero-copy device member I/O moves the request's own
// pages with O_DIRECT, which a member refuses (EINVAL) unless every page
// segment starts on its dma alignment and is whole logical blocks long;
// the driver's default lets user buffers be 4-byte aligned.
func (p *Params) AlignDMA(lbs int) {
	p.Types |= ParamTypeDMAAlign
	p.DMA.Alignment = uint32(max(lbs, 512) - 1)
}

// ublk_params types and basic attributes.
const (
	ParamTypeBasic   uint32 = 1 << 0
	ParamTypeDiscard uint32 = 1 << 1
	ParamTypeDevt    uint32 = 1 << 2
	// ParamTypeDMAAlign (6.14+): without it the driver lets user buffers
	// be 4-byte aligned (dma_alignment 3).
	ParamTypeDMAAlign uint32 = 1 << 4

	AttrReadOnly      uint32 = 1 << 0
	AttrRotational    uint32 = 1 << 1
	AttrVolatileCache uint32 = 1 << 2
	AttrFUA           uint32 = 1 << 3
)

// Device feature flags (UBLK_F_*).
const (
	FlagSupportZeroCopy     uint64 = 1 << 0
	FlagURingCmdCompInTask  uint64 = 1 << 1
	FlagNeedGetData         uint64 = 1 << 2
	FlagUserRecovery        uint64 = 1 << 3
	FlagUserRecoveryReissue uint64 = 1 << 4
	FlagUnprivilegedDev     uint64 = 1 << 5
	FlagCmdIoctlEncode      uint64 = 1 << 6
	FlagUserCopy            uint64 = 1 << 7
	FlagZoned               uint64 = 1 << 8
	FlagUserRecoveryFailIO  uint64 = 1 << 9  // 6.11
	FlagUpdateSize          uint64 = 1 << 10 // 6.16
	FlagAutoBufReg          uint64 = 1 << 11 // 6.16
	FlagQuiesce             uint64 = 1 << 12 // 6.16
	FlagPerIODaemon         uint64 = 1 << 13 // 6.16
	FlagBufRegOffDaemon     uint64 = 1 << 14 // 6.17
	FlagBatchIO             uint64 = 1 << 15 // 7.0
	FlagIntegrity           uint64 = 1 << 16 // 7.0
	FlagSafeStopDev         uint64 = 1 << 17 // 7.0
	FlagNoAutoPartScan      uint64 = 1 << 18 // 7.0
	FlagShmemZC             uint64 = 1 << 19
	FlagIODescSize          uint64 = 1 << 20

	flagsRequiredByThisDaemon = FlagCmdIoctlEncode | FlagUserRecovery | FlagUserRecoveryReissue
	// flagsUsedWherePresent are asked for when the driver offers them
	// (UBLK_U_CMD_GET_FEATURES); the device works without them.
	//
	// NoAutoPartScan: newer drivers (7.3 here) scan partitions from a
	// work item after START_DEV returns; that scan can still be reading
	// when a quick STOP follows, and its reads then fail with I/O errors
	// in the kernel log. With the flag the scan is ours: Create runs it (BLKRRPART)
	// before returning, as START_DEV itself did on older kernels.
	//
	// Not used: Quiesce. A daemon handing its mounted devices over with
	// QUIESCE_DEV (in-flight requests completed instead of aborted and
	// reissued) left requests stuck in the 7.3 kernel after the next
	// server's recovery, once in three hand-overs under fio; the plain
	// exit-and-recover hand-over has no such failure on record.
	//
	// UpdateSize: `grow` tells the kernel the array's new size
	// (UBLK_U_CMD_UPDATE_SIZE); a device created without it cannot grow.
	flagsUsedWherePresent = FlagNoAutoPartScan | FlagUpdateSize
	// flagsRecoverable are the flags of a device Recover can serve: what
	// Create may ask for, the protocol-neutral ones a driver adds by
	// itself or another server may have asked for, and IODescSize when
	// the size is this server's. The others change the queue protocol.
	flagsRecoverable = flagsRequiredByThisDaemon | flagsUsedWherePresent | FlagAutoBufReg | FlagBatchIO |
		FlagURingCmdCompInTask | FlagPerIODaemon | FlagBufRegOffDaemon | FlagSafeStopDev | FlagQuiesce |
		FlagUserRecoveryFailIO | FlagIODescSize
)

// flagNames are the UBLK_F_* names, lower case without the prefix, by bit.
var flagNames = [...]string{
	"support_zero_copy", "uring_cmd_comp_in_task", "need_get_data", "user_recovery",
	"user_recovery_reissue", "unprivileged_dev", "cmd_ioctl_encode", "user_copy",
	"zoned", "user_recovery_fail_io", "update_size", "auto_buf_reg",
	"quiesce", "per_io_daemon", "buf_reg_off_daemon", "batch_io",
	"integrity", "safe_stop_dev", "no_auto_part_scan", "shmem_zc",
	"io_desc_size",
}

// FlagNames names the UBLK_F_* bits of mask in bit order ("bit N" for a
// bit this package does not know).
func FlagNames(mask uint64) []string {
	names := []string{}
	for b := range 64 {
		if mask&(1<<b) == 0 {
			continue
		}
		if b < len(flagNames) {
			names = append(names, flagNames[b])
		} else {
			names = append(names, fmt.Sprintf("bit %d", b))
		}
	}
	return names
}

// Device states (UBLK_S_DEV_*).
const (
	StateDead     uint16 = 0
	StateLive     uint16 = 1
	StateQuiesced uint16 = 2
	StateFailIO   uint16 = 3 // UBLK_F_USER_RECOVERY_FAIL_IO, without a server
)

// Request operations (UBLK_IO_OP_*) and flags (UBLK_IO_F_*, already shifted
// down by 8 as returned by Request.Flags).
const (
	IOOpRead        uint8 = 0
	IOOpWrite       uint8 = 1
	IOOpFlush       uint8 = 2
	IOOpDiscard     uint8 = 3
	IOOpWriteSame   uint8 = 4
	IOOpWriteZeroes uint8 = 5

	IOFlagFUA     uint32 = (1 << 13) >> 8
	IOFlagNoUnmap uint32 = (1 << 15) >> 8
)

// Results of a FETCH / COMMIT_AND_FETCH uring_cmd.
const (
	ioResOK    = 0
	ioResAbort = -19 // -ENODEV
)

// Limits from ublk_cmd.h.
const (
	maxQueueDepth  = 4096
	maxNrQueues    = 4096
	ioDescSize     = 24
	ctrlCmdBufSize = 80 // usable command bytes in a 128-byte SQE
)

// ioctl encoding (asm-generic/ioctl.h), used for the UBLK_U_* opcodes.
func ioc(dir, typ, nr, size uint32) uint32 { return dir<<30 | size<<16 | typ<<8 | nr }

const (
	iocNone  = 0
	iocWrite = 1
	iocRead  = 2

	sizeofCtrlCmd = 32
	sizeofIOCmd   = 16
)

// Control and I/O command opcodes, ioctl-encoded (UBLK_U_CMD_*, UBLK_U_IO_*).
var (
	cmdGetQueueAffinity  = ioc(iocRead, 'u', 0x01, sizeofCtrlCmd)
	cmdGetDevInfo        = ioc(iocRead, 'u', 0x02, sizeofCtrlCmd)
	cmdAddDev            = ioc(iocRead|iocWrite, 'u', 0x04, sizeofCtrlCmd)
	cmdDelDev            = ioc(iocRead|iocWrite, 'u', 0x05, sizeofCtrlCmd)
	cmdStartDev          = ioc(iocRead|iocWrite, 'u', 0x06, sizeofCtrlCmd)
	cmdStopDev           = ioc(iocRead|iocWrite, 'u', 0x07, sizeofCtrlCmd)
	cmdTryStopDev        = ioc(iocRead|iocWrite, 'u', 0x17, sizeofCtrlCmd) // 7.0
	cmdSetParams         = ioc(iocRead|iocWrite, 'u', 0x08, sizeofCtrlCmd)
	cmdGetParams         = ioc(iocRead, 'u', 0x09, sizeofCtrlCmd)
	cmdStartUserRecovery = ioc(iocRead|iocWrite, 'u', 0x10, sizeofCtrlCmd)
	cmdEndUserRecovery   = ioc(iocRead|iocWrite, 'u', 0x11, sizeofCtrlCmd)
	cmdGetFeatures       = ioc(iocRead, 'u', 0x13, sizeofCtrlCmd)
	cmdUpdateSize        = ioc(iocRead|iocWrite, 'u', 0x15, sizeofCtrlCmd) // 6.16: data[0] = new size in sectors

	ioFetchReq          = ioc(iocRead|iocWrite, 'u', 0x20, sizeofIOCmd)
	ioCommitAndFetchReq = ioc(iocRead|iocWrite, 'u', 0x21, sizeofIOCmd)

	// blockURingCmdDiscard is BLOCK_URING_CMD_DISCARD from <linux/blkdev.h>
	// (6.12+): an asynchronous discard of [sqe->addr, sqe->addr+sqe->addr3).
	blockURingCmdDiscard = ioc(iocNone, 0x12, 0, 0)
)

// descArea returns the mmap offset and length of queue q's descriptor
// array on /dev/ublkcN (UBLKSRV_CMD_BUF_OFFSET + q * per-queue stride).
func descArea(q, depth, pageSize int) (off int64, length int) {
	stride := roundUp(maxQueueDepth*ioDescSize, pageSize)
	return int64(q) * int64(stride), roundUp(depth*ioDescSize, pageSize)
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// ---- UBLK_F_BATCH_IO (Linux 7.0+) ----
//
// A batch device takes no per-tag FETCH/COMMIT_AND_FETCH: a queue prepares
// all its tags in one UBLK_U_IO_PREP_IO_CMDS, learns of requests from a
// multishot UBLK_U_IO_FETCH_IO_CMDS that writes their tags (__u16 each)
// into buffers of a provided-buffer ring, and commits any number of them in
// one UBLK_U_IO_COMMIT_IO_CMDS. PREP and COMMIT point sqe->addr at an
// array of elements (ublkElemHeader, followed by the buffer address when
// the device copies data).

// ublkBatchIO mirrors struct ublk_batch_io, the payload of the three batch
// commands in sqe->cmd.
type ublkBatchIO struct {
	QID       uint16
	Flags     uint16 // UBLK_BATCH_F_*
	NrElem    uint16
	ElemBytes uint8
	Reserved  uint8
	Reserved2 uint64
}

// ublkElemHeader mirrors struct ublk_elem_header, the mandatory part of
// each PREP/COMMIT element.
type ublkElemHeader struct {
	Tag      uint16
	BufIndex uint16 // with AUTO_BUF_REG: the buffer-table slot for the tag's next request
	Result   int32  // COMMIT only
}

// ublk_batch_io flags.
const (
	batchFHasZoneLBA         = 1 << 0
	batchFHasBufAddr         = 1 << 1 // each element carries the tag's buffer address (copy path)
	batchFAutoBufRegFallback = 1 << 2
)

// Batch command opcodes (UBLK_U_IO_*), ioctl-encoded on struct ublk_batch_io.
const sizeofBatchIO = 16

var (
	ioPrepIOCmds   = ioc(iocRead|iocWrite, 'u', 0x25, sizeofBatchIO)
	ioCommitIOCmds = ioc(iocRead|iocWrite, 'u', 0x26, sizeofBatchIO)
	ioFetchIOCmds  = ioc(iocRead|iocWrite, 'u', 0x27, sizeofBatchIO)
)

// ioUringBuf mirrors struct io_uring_buf, one entry of a provided-buffer
// ring. Entry 0's Resv is the ring's tail (struct io_uring_buf_ring).
type ioUringBuf struct {
	Addr uint64
	Len  uint32
	Bid  uint16
	Resv uint16
}

// ioUringBufReg mirrors struct io_uring_buf_reg, the argument of
// IORING_REGISTER_PBUF_RING (7.3 names the first padding word min_left;
// 6.12 has three __u64 of padding there: the same 40 bytes).
type ioUringBufReg struct {
	RingAddr    uint64
	RingEntries uint32
	Bgid        uint16
	Flags       uint16
	MinLeft     uint32
	Resv        [5]uint32
}

// io_uring constants for multishot uring_cmd with provided buffers.
const (
	SQEBufferSelect   uint8 = 1 << 5 // IOSQE_BUFFER_SELECT
	uringCmdMultishot       = 1 << 1 // IORING_URING_CMD_MULTISHOT, in sqe->uring_cmd_flags
	registerPbufRing        = 22     // IORING_REGISTER_PBUF_RING
	cqeFBuffer              = 1 << 0 // IORING_CQE_F_BUFFER
	cqeFMore                = 1 << 1 // IORING_CQE_F_MORE
	cqeBufferShift          = 16     // IORING_CQE_BUFFER_SHIFT
	ioResNoBufs             = -105   // -ENOBUFS: the fetch found no buffer; re-arm
)
