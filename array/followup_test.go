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
