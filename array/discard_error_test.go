package array

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review (ops): a discard that a redundant mirror answered with
// EIO failed that member, so an fstrim could leave the array degraded and
// rebuilding the whole member. md's raid1/raid10 ignore a discard's error
// on a mirror (raid1_end_write_request / raid10_end_write_request:
// discard_error takes the "uptodate" branch: no md_error, no
// WriteErrorSeen); the member holds what it held, nothing a rebuild must
// restore. The member stays active (engine: TestDiscardErrorFailsNoMember
// for the resync of the range and the request's outcome).
func TestDiscardErrorOnMirrorKeepsMember(t *testing.T) {
	rack, paths, _, a := servedMirror(t)
	defer a.Close()
	rack.SetFaults(rack.Disk(paths[1]), memdev.Fault{Ops: memdev.OpDiscard, Err: unix.EIO})
	r := newZfRing()
	h := a.newQueue(r)
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpDiscard, Sector: 1024, Sectors: 8})
	zfRun(t, h, r)
	err, done := r.done[0]
	if !done {
		t.Fatal("the discard never completed")
	}
	if st := a.Status().Members[1].State; st != "active" {
		t.Fatalf("a discard error (EIO) on a redundant mirror left member 1 %s (request: %v); md ignores discard errors and keeps it in sync", st, err)
	}
	// It fails no member, but the device reported an I/O error: counted
	// (a refusal is not: TestRefusedDiscardWriteZeroesIsNoMemberError).
	if e := a.Metrics("ublkb0").Members[1].Ops[metrics.OpDiscard].Errors; e != 1 {
		t.Errorf("a discard error (EIO) counted as %d discard error(s), want 1", e)
	}
}

// Found by review (ops): a member that cannot discard or zero ranges (a
// spare or replacement added after the device advertised them) answers
// EOPNOTSUPP, which fails no member: the operations are advisory (README:
// "Discard and write-zeroes are advisory"). Yet each refusal was counted
// in ublkraid_member_errors_total, a write-zeroes's as a "write" error,
// and the shipped alert UblkRaidMemberErrors reported "I/O errors on
// member ... N write error(s)" for a healthy disk after every fstrim or
// mkfs. A refusal counts as an operation, not as an error.
func TestRefusedDiscardWriteZeroesIsNoMemberError(t *testing.T) {
	// Each on an array of its own: the first one's copies differ, and the
	// resync it starts would hold up a second request in its window.
	for _, op := range []uint8{ublk.IOOpDiscard, ublk.IOOpWriteZeroes} {
		rack, paths, _, a := servedMirror(t)
		rack.Unsupported(rack.Disk(paths[1]))
		r := newZfRing()
		h := a.newQueue(r)
		h.Handle(&ublk.Request{Tag: 0, Op: op, Sector: 1024, Sectors: 8})
		zfRun(t, h, r)
		err, done := r.done[0]
		switch {
		case op == ublk.IOOpDiscard && (!done || err != nil):
			t.Fatalf("discard: done=%v err=%v", done, err)
		case op == ublk.IOOpWriteZeroes && (!done || !errors.Is(err, unix.EOPNOTSUPP)):
			t.Fatalf("write-zeroes: done=%v err=%v, want EOPNOTSUPP", done, err)
		}
		if st := a.Status().Members[1].State; st != "active" {
			t.Fatalf("member 1 %s after refusing", st)
		}
		m := a.Metrics("ublkb0").Members[1]
		if op == ublk.IOOpDiscard {
			if o := m.Ops[metrics.OpDiscard]; o.Ops != 1 || o.Bytes != 0 {
				t.Errorf("a discard the member refused counted as %d op(s) of %d bytes, want 1 of 0", o.Ops, o.Bytes)
			}
			if e := m.Ops[metrics.OpDiscard].Errors; e != 0 {
				t.Errorf("a discard the member refused (EOPNOTSUPP, advisory) counted as %d discard error(s) in ublkraid_member_errors_total", e)
			}
		} else if e := m.Ops[metrics.OpWrite].Errors; e != 0 {
			t.Errorf("a write-zeroes the member refused (EOPNOTSUPP: the kernel writes zeroes instead) counted as %d write error(s) in ublkraid_member_errors_total", e)
		}
		a.Close()
	}
}
