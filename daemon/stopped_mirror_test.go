package daemon

import (
	"testing"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/engine"
)

// stoppedMirror makes a raid1 of two size-byte files, stopped clean (as a
// daemon's del leaves it), and returns their paths and the array's UUID.
func stoppedMirror(t *testing.T, size int64) ([]string, string) {
	t.Helper()
	paths := files(t, 2, size)
	a, err := array.Open(paths, array.CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	uuid := a.Status().UUID
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	return paths, uuid
}
