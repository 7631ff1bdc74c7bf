package daemon

import (
	"net/http"
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review: POST /arrays {level 10, layout f2, chunk 64K} over the
// members of a stopped raid10 n2 (chunk 512K) was accepted as an assembly
// of the old array (its superblocks written), where a different level is
// refused. Now refused too, nothing written.
func TestAddLevelOverSameLevelOtherGeometry(t *testing.T) {
	paths := files(t, 4, 32<<20)
	o, err := array.Open(paths, array.CreateSpec{Name: "old", Level: engine.Level10, Layout: engine.LayoutN2}, true)
	if err != nil {
		t.Fatal(err)
	}
	o.SetClean(true)
	o.Close()
	before := hashes(t, paths...)
	m := NewManager(nil, ManagerOptions{})
	five := 5
	code, msg := post(t, m, "/arrays", AddRequest{Members: paths, Level: "10", Layout: "f2", ChunkBytes: 64 << 10, Name: "old", Number: &five})
	m.mu.Lock()
	for _, s := range m.arrays {
		if s.a != nil {
			defer s.a.Close()
		}
	}
	m.mu.Unlock()
	if code == http.StatusOK || code/100 == 2 {
		t.Errorf("add --level 10 --layout f2 --chunk 64K over a raid10 n2 (chunk 512K): %d %s", code, msg)
	}
	sameHashes(t, "add --level over another geometry", before, hashes(t, paths...))
}
