package daemon_test

import (
	"errors"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
	"github.com/ublk-raid/ublk-raid/daemon/daemontest"
)

// partialDelete answers DeleteAll as the Manager does when one array is
// in use: the arrays it deleted, and a refusal naming the busy one.
type partialDelete struct{ *daemontest.Backend }

func (partialDelete) DeleteAll() (daemon.DeleteResult, error) {
	return daemon.DeleteResult{Deleted: []string{"/dev/ublkb0", "/dev/ublkb2"}},
		daemon.Refused(errors.New("deleting /dev/ublkb1: /dev/ublkb1 is in use (mounted, or held by another program): unmount it first"))
}

// `del --all` with one array in use: the daemon deleted the others, and
// its answer (409) says which, with the error, so that the CLI (which
// prints res.Deleted even on error) tells the operator which devices are
// gone. mdadm --stop --scan reports each array it stopped.
func TestDeleteAllReportsWhatItDeleted(t *testing.T) {
	c := daemon.NewClient(daemontest.Serve(t, partialDelete{daemontest.New()}))
	res, err := c.DeleteAll()
	if err == nil {
		t.Fatal("no error for the busy array")
	}
	if len(res.Deleted) != 2 {
		t.Errorf("del --all, ublkb1 busy: client got deleted %v (error %v); the daemon deleted /dev/ublkb0 and /dev/ublkb2", res.Deleted, err)
	}
}
