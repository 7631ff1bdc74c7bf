// Package ublk is ublk-raid's only door to the kernel: an io_uring ring on
// golang.org/x/sys/unix and the ublk driver's control and I/O protocol
// (Linux 6.12 UAPI, mirrored in uapi.go and checked by uapi_test.go against
// the 6.12 and 7.3 headers).
//
// Features are negotiated, not assumed: Create asks the driver what it
// offers (GET_FEATURES), requires USER_RECOVERY|REISSUE and
// CMD_IOCTL_ENCODE (6.5+), and asks for the optional ones it uses only
// where they are offered (flagsUsedWherePresent); Device.Info().Flags are
// what the device got, and FlagNames names them.
//
// Threads and lifetimes:
//   - Control is safe for concurrent use. Every command wait is bounded
//     (Control.Timeout), so a wedged kernel gives an error, not a hang.
//   - Each Queue is served by one goroutine that calls runtime.LockOSThread
//     for its whole life (the 6.12 driver requires that one task issue all of
//     a queue's commands), pins itself to a CPU of the queue's affinity, sets
//     PR_SET_IO_FLUSHER and owns one ring carrying both the ublk commands and
//     the target's member I/O. A Target's QueueHandler runs only on that
//     thread, so the I/O path has no locks, no cross-thread hand-off and no
//     allocation.
//   - Every fetched request is committed exactly once (Queue.Complete), with
//     the full byte count or a negative errno; errors become errnos in one
//     place, commitResult. Completing twice panics: it is a bug.
//   - Tag buffers and descriptor arrays are mmap'd outside the Go heap and
//     live as long as their queue. On a zero-copy device (AUTO_BUF_REG,
//     asked for when the target is a ZeroCopyTarget and the driver offers
//     it) the data never passes through them: the driver registers each
//     request's pages in the queue ring's buffer table at slot = tag, and
//     targets move data with READ_FIXED/WRITE_FIXED on that slot
//     (PrepRWSlot). The tag buffers are then mapped inaccessible, as
//     address space for Request.Buf only. Devices are created with
//     USER_RECOVERY|USER_RECOVERY_REISSUE: when the server dies, the kernel
//     quiesces the device and Recover re-attaches a new process; requests
//     the old one had not committed are reissued.
//   - With Config.BatchIO (UBLK_F_BATCH_IO, 7.0+, opt-in; batch.go) a
//     queue sends no per-tag commands: one PREP_IO_CMDS readies every tag,
//     one multishot FETCH_IO_CMDS delivers tags into a provided-buffer
//     ring, and each turn of the loop commits all it completed in one
//     COMMIT_IO_CMDS. The Target contract is the same; Recover serves a
//     device the way it was created.
//   - Device.Stop/Delete send STOP_DEV, which aborts every FETCH; the queue
//     goroutines then end and release their rings and the character device,
//     which DEL_DEV waits for. Device.StopUnused sends TRY_STOP_DEV instead
//     (SAFE_STOP_DEV, 7.0+): the kernel refuses while the block device is
//     open, and the device goes on serving. The driver's stop itself
//     cannot fail: any other error but ENODEV (the device gone, its
//     commands aborted) is the control path's (EPERM, EINVAL, no answer)
//     and aborted nothing, so Stop returns it at once wrapping
//     ErrNotStopped, the device still served and stoppable later.
package ublk
