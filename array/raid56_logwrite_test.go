package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A log entry's write (MemberIO.Log) goes to the member's write-hole log
// area, a data write to its data area.
func TestParityLogWriteOffset(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ChunkSectors: 16, serveParity: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.logOffset == 0 || a.logOffset != a.SBs[0].LogOffset {
		t.Fatalf("log offset %d, superblock's %d", a.logOffset, a.SBs[0].LogOffset)
	}
	r := &pRing{done: map[uint16]error{}}
	h := a.newQueue(r)
	data := pageBuf(4096)
	h.Submit(0, engine.OpID(0), engine.MemberIO{Member: 1, Kind: engine.IOWrite, FUA: true, Log: true, Sector: 8, Sectors: 8}, data)
	h.Submit(1, engine.OpID(0), engine.MemberIO{Member: 1, Kind: engine.IOWrite, Sector: 8, Sectors: 8}, data)
	if len(r.pending) != 2 || r.pending[0].off != a.logOffset+4096 || r.pending[1].off != a.dataOffset+4096 {
		t.Fatalf("submitted %+v; want the log write at %d, the data write at %d", r.pending, a.logOffset+4096, a.dataOffset+4096)
	}
}
