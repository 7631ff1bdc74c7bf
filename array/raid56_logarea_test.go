package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A raid5/6 array is created with a write-hole log area on every member
// (and spare): at the end of the reserved area, sized by parityLogBytes,
// its header holding the first checkpoint. raid1 has none.
func TestParityCreateLogArea(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6, engine.Level1} {
		paths := memberFiles(t, 5, 64<<20)
		spec := CreateSpec{Level: level, ChunkSectors: 16, Spares: paths[4:]}
		if level == engine.Level1 {
			spec.ChunkSectors = 0
		}
		a, err := Open(paths[:4], spec, true)
		if err != nil {
			t.Fatal(err)
		}
		all := append(append([]*Member(nil), a.Members...), a.spares[0].m)
		for _, m := range all {
			b, err := m.ReadBlock(engine.SuperblockOffset, engine.SuperblockSize)
			if err != nil {
				t.Fatal(err)
			}
			sb, err := engine.ParseSuperblock(b)
			if err != nil {
				t.Fatal(err)
			}
			if level == engine.Level1 {
				if sb.LogBytes != 0 || sb.LogOffset != 0 {
					t.Fatalf("raid1 member %s has a log area %d+%d", m.Path, sb.LogOffset, sb.LogBytes)
				}
				continue
			}
			if want := parityLogBytes(64<<20, parityGeometryOf(spec, 4)); sb.LogBytes != want || sb.LogOffset+sb.LogBytes != sb.DataOffset {
				t.Fatalf("%s %s: log area %d+%d, want %d bytes ending at the data offset %d", level, m.Path, sb.LogOffset, sb.LogBytes, want, sb.DataOffset)
			}
			hb, err := m.ReadBlock(int64(sb.LogOffset), engine.ParityLogHeaderSize)
			if err != nil {
				t.Fatal(err)
			}
			h, err := engine.DecodeParityLogHeader(hb, sb.ArrayUUID)
			if err != nil || h.Checkpoint != 1 {
				t.Fatalf("%s %s: log header %+v: %v", level, m.Path, h, err)
			}
		}
		a.Close()
	}
	g := engine.ParityGeometry{Level: engine.Level5, Members: 5, ChunkSectors: 128}
	if got := parityLogBytes(1<<40, g); got != engine.MaxLogBytes {
		t.Errorf("log of a 1 TiB member: %d", got)
	}
	if got := parityLogBytes(1<<20, g); got != 256<<10 {
		t.Errorf("log of a 1 MiB member: %d", got)
	}
	if got := parityLogBytes(16<<30+12345*512, g); got%4096 != 0 || got != (16<<30+12345*512)/512&^4095 {
		t.Errorf("log of an odd member: %d", got)
	}
	// Room for 8 queues' rings of two default writes each.
	need := uint64(engine.ParityLogHeaderSize + 8*2*g.ParityLogBytesPerRequest(512<<10))
	if got := parityLogBytes(1<<30, g); got < need {
		t.Errorf("log of a 1 GiB member: %d, less than %d", got, need)
	}
}
