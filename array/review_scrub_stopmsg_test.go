package array

import (
	"strings"
	"sync"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// Found by review: `check` (or `repair`) while a job runs is refused,
// exit 1, with "a check is running: wait for it or stop it first". No
// command stops a job (md's `echo idle > sync_action` has no counterpart:
// the commands are add, del, list, detail, fail, remove, re-add, replace,
// check, repair, grow), so the one line tells the operator to do
// something the tool does not offer (short of `del`, which stops the
// array). The contract: a refusal is one clear line.
func TestReviewScrubBusyRefusalNamesNoStop(t *testing.T) {
	paths := memberFiles(t, 2, 8<<20)
	setRW := hookRW(t) // (before Open: its repair worker takes memberRW)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	dev0 := a.Members[0].Device
	release := make(chan struct{})
	var rel, reached sync.Once
	at := make(chan struct{})
	setRW(func(d Device, p []byte, off int64, write bool) error {
		if d == dev0 && p != nil && !write {
			reached.Do(func() { close(at) })
			<-release // the check stays running
		}
		return deviceRW(d, p, off, write)
	})
	t.Cleanup(func() { rel.Do(func() { close(release) }); memberRW = deviceRW })
	a.sync.s = resync.New(a.Engine, a.xbar, newMemberIO(a), resync.Config{})
	if err := a.Check(false); err != nil {
		t.Fatal(err)
	}
	<-at
	err = a.Check(true)
	rel.Do(func() { close(release) })
	a.WaitSync()
	if err == nil {
		t.Fatal("a repair started while a check ran")
	}
	if strings.Contains(err.Error(), "stop it") {
		t.Errorf("refusal %q tells the operator to stop the running job, which no command does", err)
	}
}
