package array

import (
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Write-mostly members are given to Open, which checks them before
// anything is written: one that gets no role at assembly (stale after a
// failure) is refused with the blank spare beside it left as it was.
func TestOpenWriteMostly(t *testing.T) {
	const size = 8 << 20
	paths := memberFiles(t, 3, size)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, WriteMostly: paths[1:2]}, true)
	if err != nil {
		t.Fatal(err)
	}
	if a.WriteMostly != 1<<1 {
		t.Fatalf("new array: write-mostly mask %#x, want role 1", a.WriteMostly)
	}
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	blank := memberFiles(t, 1, size)[0]
	all := append(append([]string(nil), paths...), blank)
	before := contents(t, all...)
	_, err = Open(paths, CreateSpec{Spares: []string{blank}, WriteMostly: paths[2:]}, false)
	if err == nil || !strings.Contains(err.Error(), "write-mostly "+paths[2]+": it holds no role") {
		t.Fatalf("assembly with a stale write-mostly member: %v", err)
	}
	unchanged(t, "refused assembly", all, before)
	if _, err = Open(paths[:2], CreateSpec{WriteMostly: paths[2:]}, false); err == nil || !strings.Contains(err.Error(), "not one of the members") {
		t.Fatalf("write-mostly not among the members: %v", err)
	}
	unchanged(t, "refused assembly", all, before)
	a, err = Open(paths, CreateSpec{WriteMostly: paths[:1]}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.WriteMostly != 1 {
		t.Fatalf("assembled: write-mostly mask %#x, want role 0", a.WriteMostly)
	}
}

// A superblock update marshals and validates every new superblock before
// it writes anything, the bitmap header's new generation included: an
// invalid one refuses the update and leaves every member as it was.
func TestWriteSuperblocksValidatesBeforeWriting(t *testing.T) {
	for _, bitmap := range []bool{true, false} {
		paths := memberFiles(t, 2, 8<<20)
		a, err := Open(paths, CreateSpec{Level: engine.Level1, NoBitmap: !bitmap}, true)
		if err != nil {
			t.Fatal(err)
		}
		if (a.Bitmap != nil) != bitmap {
			t.Fatalf("bitmap %v: the array has none", bitmap)
		}
		if err := a.SetClean(false); err != nil {
			t.Fatal(err)
		}
		before, events := contents(t, paths...), a.Status().Events
		a.mu.Lock()
		good := a.SBs[1].DataSectors
		a.SBs[1].DataSectors = 3 // not a multiple of 4 KiB: invalid
		a.mu.Unlock()
		err = a.SetClean(true)
		if err == nil || !strings.Contains(err.Error(), "superblock of role 1") || !strings.Contains(err.Error(), "nothing written") {
			t.Errorf("bitmap %v: update with an invalid superblock: %v", bitmap, err)
		}
		unchanged(t, "refused superblock update", paths, before)
		a.mu.Lock()
		a.SBs[1].DataSectors = good
		a.mu.Unlock()
		if err := a.SetClean(true); err != nil {
			t.Fatal(err)
		}
		if got := a.Status().Events; got != events+1 {
			t.Errorf("bitmap %v: events %d after the refused update and a good one; want %d", bitmap, got, events+1)
		}
		a.Close()
	}
}
