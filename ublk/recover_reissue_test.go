package ublk

import "testing"

// Found by review (user recovery): this server's hand-overs (a restart leaving a
// mounted device for the next daemon, a grow's Detach and re-attach, a
// failed queue's recovery) are without I/O errors only on a device with
// USER_RECOVERY_REISSUE: the UAPI says of a device with USER_RECOVERY
// alone "Outstanding I/O when ublk server exits is met with errors".
// Create therefore requires REISSUE (flagsRequiredByThisDaemon), but
// Recover required USER_RECOVERY only: it took over such a device (made
// by another ublk server) and its next hand-over failed the requests in
// flight with EIO.
func TestCheckRecoverRefusesDeviceWithoutReissue(t *testing.T) {
	info := deadServerDevice()
	info.Flags &^= FlagUserRecoveryReissue // USER_RECOVERY alone
	if err := CheckRecover(fakeControl(t, info, Params{}), 7, nopTarget{}); err == nil {
		t.Fatalf("CheckRecover accepts a device with %v but not user_recovery_reissue: its requests in flight fail at this server's next hand-over",
			FlagNames(info.Flags&(FlagUserRecovery|FlagUserRecoveryReissue|FlagUserRecoveryFailIO)))
	}
}
