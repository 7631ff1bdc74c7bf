package array

import (
	"errors"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// TestRestartBlankActiveMemberRefused: at a restart (SkipAbsent with the
// array's UUID) a listed device now blank is left out like an absent one,
// but not when the freshest superblock records its role active: that
// member may hold the freshest data, the array is not started without it,
// and nothing is written.
func TestRestartBlankActiveMemberRefused(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	uuid := a.Status().UUID
	stop(t, a)
	f, err := os.OpenFile(paths[1], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := fileBytes(t, paths...)
	_, err = Open(paths, CreateSpec{SkipAbsent: true, AsRecorded: true, UUID: uuid}, false)
	if !errors.Is(err, ErrMemberAbsent) {
		t.Fatalf("restart with an active member's device blank: %v, want ErrMemberAbsent", err)
	}
	if !slices2DEqual(before, fileBytes(t, paths...)) {
		t.Fatal("the refused restart wrote to the members")
	}
	// Recorded failed: left out, the array starts degraded.
	a, err = Open(paths[:1], CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(1); err != nil && !errors.Is(err, engine.ErrLastCopy) {
		t.Logf("fail of the absent role: %v", err)
	}
	stop(t, a)
	b, err := Open(paths, CreateSpec{SkipAbsent: true, AsRecorded: true, UUID: uuid}, false)
	if err != nil {
		t.Fatalf("restart with a failed member's device blank: %v", err)
	}
	defer b.Close()
	if len(b.Absent) != 1 || b.Absent[0] != paths[1] || len(b.Warnings) == 0 {
		t.Fatalf("absent %v, warnings %q", b.Absent, b.Warnings)
	}
}
