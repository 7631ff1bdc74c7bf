package engine

import (
	"slices"
	"testing"
)

// A member a generation behind whose superblock lays the data out
// otherwise than the freshest (layout, chunk, creation time) is not
// trusted in its role through the slack (EventSlack), as md's
// super_1_load rejects a "strangely different" superblock: served, it
// would be read with another layout, and its fields would spread to every
// member at the next update. It is stale, as an older member is.
func TestAssembleSlackMemberOddGeometryStale(t *testing.T) {
	for _, odd := range []struct {
		field  string
		change func(*Superblock)
	}{
		{"chunk", func(sb *Superblock) { sb.ChunkSectors = 128 }},
		{"layout", func(sb *Superblock) { sb.Layout = 0x201 }},
		{"creation", func(sb *Superblock) { sb.CreateTime++ }},
	} {
		sbs := asmNewArray(t, 10, 0x102, 4, 0) // raid10 near 2, chunk 1024
		next := asmNext(sbs[:3], nil)
		m := *sbs[3]
		odd.change(&m)
		a := mustAssemble(t, asmInputs(t, next[0], next[1], next[2], &m))
		if a.Roles[3].State == RoleActive || !slices.Equal(a.Stale, []string{"/dev/vdd"}) {
			t.Errorf("odd %s a generation behind: role 3 %s, stale %q", odd.field, a.Roles[3].State, a.Stale)
		}
		// The same member with the array's geometry is trusted.
		a = mustAssemble(t, asmInputs(t, next[0], next[1], next[2], sbs[3]))
		if a.Roles[3].State != RoleActive || len(a.Stale) != 0 {
			t.Errorf("a generation behind: role 3 %s, stale %q", a.Roles[3].State, a.Stale)
		}
	}
}
