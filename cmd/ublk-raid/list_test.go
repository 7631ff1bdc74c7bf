package main

import (
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/daemon"
)

// list shows every device an array holds, spares too (marked (S) as in
// /proc/mdstat): an operator checking that a spare stands by must not
// need detail for each array.
func TestListTextShowsSpares(t *testing.T) {
	j := listJSON{Daemon: true, Arrays: []daemon.Array{{
		Number: 0, Device: "/dev/ublkb0", Level: "raid1", SizeBytes: 1 << 30, State: "clean",
		RaidDisks: 2, ActiveDisks: 1, SpareDisks: 1, Spares: []string{"/dev/vdd"},
		Members: []daemon.Member{
			{Role: 0, Path: "/dev/vdb", State: "active"},
			{Role: 1, Path: "/dev/vdc", State: "faulty"},
		},
	}}}
	var out strings.Builder
	if err := writeListText(&out, j); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one array line:\n%s", out.String())
	}
	if !strings.HasSuffix(lines[1], "/dev/vdb /dev/vdc(faulty) /dev/vdd(S)") {
		t.Fatalf("array line %q: want its members, then its spare marked (S)", lines[1])
	}
}
