package array

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A raid10 CreateSpec without a Layout (the API's zero value; the daemon
// defaults n2) is refused with an error. It used to panic (an integer
// divide by zero sizing the bitmap from the zero layout's far copies).
func TestCreateRaid10WithoutLayoutRefused(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level10, ChunkSectors: 16}, true)
	if err == nil {
		a.Close()
		t.Fatal("raid10 without a layout was created")
	}
	t.Log(err)
}
