package array

import (
	"errors"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (fx2). `fail 1` on a raid1 whose other member (the last in-sync
// copy) fails the superblock write once: the fail is refused (the record
// was not made), yet the role is left faulty in memory. The operator
// retries `fail 1` once the write error is gone: since f89fbaf a fail of
// a member already faulty answers 0 at once, without making its failure
// durable. Fail's contract ("records it in the surviving members'
// superblocks before returning") is broken: the retry succeeds with no
// superblock saying so, and a crash now brings role 1 back in sync.
func TestReviewfx2FailRetryAfterUnrecordedFailureIsDurable(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	orig := writeSuperblock
	t.Cleanup(func() { writeSuperblock = orig })
	failing := true
	writeSuperblock = func(m *Member, b []byte) error {
		if m.Path == paths[0] && failing {
			return errors.New("injected: superblock write error")
		}
		return orig(m, b)
	}
	if err := a.Fail(1); err == nil {
		t.Fatal("fail 1 succeeded although the last in-sync copy refused the superblock update")
	} else {
		t.Logf("first fail 1: %v", err)
	}
	failing = false // the transient error is gone; the operator retries
	err = a.Fail(1)
	sb := superblockOf(t, paths[0])
	if err == nil && sb.Roles[1].State != engine.RoleFaulty {
		a.Close() // a crash: nothing more written
		if b, oerr := Open(paths, CreateSpec{}, false); oerr == nil {
			t.Logf("reassembled after the crash: role 1 is %s", b.Status().Members[1].State)
			b.Close()
		}
		t.Fatalf("retried fail 1 answered success, but role 0's superblock on disk says role 1 is %v (events %d): the failure was never recorded", sb.Roles[1].State, sb.Events)
	}
	if err != nil {
		t.Fatalf("retried fail 1: %v", err)
	}
	// The failed member's own superblock is marked too (markFailed), as
	// after a first fail that succeeds: assembled alone, it is refused.
	if own := superblockOf(t, paths[1]); own.Roles[1].State != engine.RoleFaulty {
		t.Fatalf("retried fail 1: the failed member's own superblock says role 1 is %v", own.Roles[1].State)
	}
}
