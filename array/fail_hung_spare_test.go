package array

import (
	"testing"
	"time"
)

// Found by review (fx5): fail of a hung member on an array with a spare.
// Fail records the failure (persist), which starts the spare's activation
// in a goroutine (go a.activateSpare), then writes the failed member's own
// superblock (markFailed) and waits up to markFailedWait for it. The
// activation swaps the spare into the role and hands the old device to
// closeWhenAnswered, which closes it at once: the markFailed write is
// neither counted in Member.busy (jobOut, out) nor in lateOn until it is
// given up 2 s later. The device is closed (its exclusive claim released:
// free for another user, or for a new array) while the superblock write is
// still out on it, which closeWhenAnswered's own contract forbids ("until
// then it stays open ... so that no other user takes it while a late write
// may still land there"), and the markFailed doc claims ("the device is
// not removed nor added back until it answers").
func TestFailHungWithSpareKeepsDeviceClaimed(t *testing.T) {
	a, rack, hung := hungRAID1(t, 5, "/s0")
	a.Configure(func() { a.MemberTimeout = 0 })
	a.mu.Lock()
	old := a.Members[1]
	a.mu.Unlock()
	// The flusher's first batches (the bitmap's rewrite) are done before
	// the device hangs: with no member timeout one out on it would hang.
	a.fl.do(func() {})
	rack.Hang(hung)
	if err := a.Fail(1); err != nil {
		t.Fatalf("fail: %v", err)
	}
	// The spare took the role (its rebuild may run: not waited for).
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.mu.Lock()
		now := a.Members[1]
		a.mu.Unlock()
		if now != old && now != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spare never took role 1 (%s)", a.Status().Members[1].State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !lateOn(old) {
		t.Skip("markFailed wrote nothing (the activation recorded the spare first): no write out")
	}
	// markFailed's superblock write to /h1 is out (hung, given up: lateOn).
	// The device must still be claimed by the array.
	d, err := rack.Open("/h1")
	if err == nil {
		d.Close()
		t.Fatalf("the failed device /h1 was closed (another open of it succeeded) while markFailed's superblock write to it is still out (lateOn %v): closeWhenAnswered closed it when the spare took the role, before the write was given up, as neither busy() nor lateOn counted it; a late write can land over the device's next user", lateOn(old))
	}
	t.Logf("open refused as it should be: %v", err)
}
