package engine

import (
	"bytes"
	"testing"
)

// A read error of member M in stripe 0 makes the request avoid M in that
// stripe only. With another member rebuilding (readable in stripe 0, not
// yet in stripe 1), avoiding M in stripe 1 too would leave two members
// unreadable there and fail the read (ErrStripeLost), although M's
// stripe-1 rows are fine and stripe 0's bad rows can be rebuilt from the
// others. (Found by review.)
func TestRaid56ReadRepairAvoidsPerStripe(t *testing.T) {
	g := raid56Geo(Level5, 4) // 8-sector chunks, 3 data chunks per stripe
	w := newPWorld(t, g, 1, 1, 64<<10)
	// (Without the hook, as before this change, the read fails too:
	// ErrLastCopy, the member's failure refused with another rebuilding.)
	w.execs[0].ReadRepair = func(int, uint64, uint32) {}
	n := uint32(g.ArraySectors())
	data := make([]byte, n<<9)
	fill(data, 4)
	if err := w.do(t, 0, ReqWrite, 0, n, data); err != nil {
		t.Fatal(err)
	}
	per := g.ChunkSectors * uint64(g.DataMembers())
	// M: the member holding array sector 0 (stripe 0). rb: some other
	// member, rebuilt through stripe 0 only.
	_, _, mem, _ := g.LocateData(0)
	rb := (mem + 1) % g.Members
	w.arr.Update(func(ms []MemberStatus) {
		ms[rb] = MemberStatus{State: MemberRebuilding, RebuildOffset: g.ChunkSectors}
	})
	w.failHook = func(o pOp) bool {
		return o.io.Kind == IORead && int(o.io.Member) == mem && o.io.Sector < g.ChunkSectors
	}
	got := make([]byte, 2*per<<9)
	err := w.do(t, 0, ReqRead, 0, uint32(2*per), got)
	if err != nil || !bytes.Equal(got, data[:2*per<<9]) {
		t.Fatalf("read of stripes 0-1 with a bad sector of member %d in stripe 0 (member %d rebuilt through stripe 0): %v", mem, rb, err)
	}
}
