package ublk

import (
	"os"
	"testing"
)

// CheckRecoverDevice is asked before the array is assembled (which may
// write its members): it must refuse what no waiting and no target can
// change, and leave to CheckRecover what a target or a moment can (a
// zero-copy device, a server killed a moment ago still holding it).
func TestCheckRecoverDeviceBeforeAssembly(t *testing.T) {
	ok := deadServerDevice()
	if err := CheckRecoverDevice(fakeControl(t, ok, Params{}), 7); err != nil {
		t.Fatalf("a device waiting for recovery: %v", err)
	}
	zc := deadServerDevice()
	zc.Flags |= FlagAutoBufReg
	if err := CheckRecoverDevice(fakeControl(t, zc, Params{}), 7); err != nil {
		t.Fatalf("a zero-copy device refused before the target is known: %v", err)
	}
	live := deadServerDevice()
	live.State, live.UblksrvPid = StateLive, int32(os.Getpid())
	if err := CheckRecoverDevice(fakeControl(t, live, Params{}), 7); err != nil {
		t.Fatalf("a device still held by its server (which may be exiting) refused before the members are opened: %v", err)
	}
	if err := CheckRecover(fakeControl(t, live, Params{}), 7, nopTarget{}); err == nil {
		t.Fatal("CheckRecover accepts a device a live server holds")
	}
	for name, change := range map[string]func(*DevInfo){
		"no user recovery": func(i *DevInfo) { i.Flags &^= FlagUserRecovery },
		"no reissue":       func(i *DevInfo) { i.Flags &^= FlagUserRecoveryReissue },
		"dead":             func(i *DevInfo) { i.State = StateDead },
		"foreign feature":  func(i *DevInfo) { i.Flags |= FlagUserCopy },
		"no queues":        func(i *DevInfo) { i.NrHwQueues = 0 },
	} {
		info := deadServerDevice()
		change(&info)
		if err := CheckRecoverDevice(fakeControl(t, info, Params{}), 7); err == nil {
			t.Errorf("%s: CheckRecoverDevice accepts it", name)
		}
	}
}
