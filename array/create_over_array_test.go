package array

import (
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review: a create (a level given) over the members of an array
// of that level assembled the old array whatever else the request said:
// another layout or chunk size, or fewer members (the old array then came
// up degraded, its other members recorded missing). mdadm --create never
// hands back the old array in place of the one asked for. Refused now,
// nothing written; a request that names no layout or chunk (the
// defaults) still assembles the array as the product says ("creates or
// assembles").
func TestCreateOverArrayOfOtherGeometryRefused(t *testing.T) {
	paths := memberFiles(t, 4, 32<<20)
	o, err := Open(paths, CreateSpec{Name: "old", Level: engine.Level10, Layout: engine.LayoutF2, ChunkSectors: 1024}, true)
	if err != nil {
		t.Fatal(err)
	}
	stop(t, o)
	before := contents(t, paths...)
	for _, c := range []struct {
		name    string
		members []string
		spec    CreateSpec
		want    string
	}{
		{"layout", paths, CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, LayoutGiven: true, ChunkSectors: 1024}, "layout n2"},
		{"chunk", paths, CreateSpec{Level: engine.Level10, Layout: engine.LayoutF2, ChunkSectors: 128, ChunkGiven: true}, "chunk 64 KiB"},
		{"fewer members", paths[:2], CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 1024}, "2 members"},
	} {
		a, err := Open(c.members, c.spec, true)
		if err == nil {
			a.Close()
			t.Fatalf("%s: the old array was assembled in place of the one asked for", c.name)
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "wipe them first") {
			t.Errorf("%s: %v, want it to name %q", c.name, err, c.want)
		}
		unchanged(t, c.name, paths, before)
	}
	// Defaults (nothing given but the level) assemble it as it is.
	a, err := Open(paths, CreateSpec{Level: engine.Level10, Layout: engine.LayoutN2, ChunkSectors: 1024}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Created || a.Engine.Geo.Layout != engine.LayoutF2 {
		t.Errorf("created %v, layout %v: want the old f2 array assembled", a.Created, a.Engine.Geo.Layout)
	}
}

// As above for raid5: another parity layout given.
func TestCreateOverRaid5OfOtherLayoutRefused(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	o, err := Open(paths, CreateSpec{Level: engine.Level5, ParityLayout: engine.LeftSymmetric, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	stop(t, o)
	before := contents(t, paths...)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ParityLayout: engine.RightAsymmetric, LayoutGiven: true, ChunkSectors: 128}, true)
	if err == nil {
		a.Close()
		t.Fatal("raid5 left-symmetric assembled for a create asking right-asymmetric")
	}
	if !strings.Contains(err.Error(), "right-asymmetric") {
		t.Errorf("%v: want it to name the layout asked for", err)
	}
	unchanged(t, "refused create", paths, before)
}
