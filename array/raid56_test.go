package array

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// A raid5/6 array with write-mostly members is refused before any member
// is written.
func TestParityWriteMostlyRefused(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6} {
		paths := memberFiles(t, 4, 64<<20)
		before := fileBytes(t, paths...)
		a, err := Open(paths, CreateSpec{Level: level, ChunkSectors: 128, WriteMostly: paths[1:2]}, true)
		if err == nil || !strings.Contains(err.Error(), "write-mostly") || !strings.Contains(err.Error(), level.String()) {
			if a != nil {
				a.Close()
			}
			t.Fatalf("%s: Open with a write-mostly member = %v", level, err)
		}
		for i, b := range fileBytes(t, paths...) {
			if !bytes.Equal(b, before[i]) {
				t.Errorf("%s: member %d was written", level, i)
			}
		}
	}
}

// Members carrying a raid5/6 array assemble as one; asking to create
// another level over them is refused naming what they hold, with every
// byte left as it was.
func TestParityCreateOverParityRefused(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6} {
		paths := memberFiles(t, 5, 64<<20)
		a, err := Open(paths, CreateSpec{Name: "p", Level: level, ParityLayout: engine.RightSymmetric, ChunkSectors: 128}, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.SetClean(true); err != nil {
			t.Fatal(err)
		}
		a.Close()
		before := fileBytes(t, paths...)
		a, err = Open(paths, CreateSpec{Level: engine.Level1}, true)
		if err == nil || !strings.Contains(err.Error(), "hold a "+level.String()+" array") {
			if a != nil {
				a.Close()
			}
			t.Fatalf("%s: create raid1 over it = %v", level, err)
		}
		for i, b := range fileBytes(t, paths...) {
			if !bytes.Equal(b, before[i]) {
				t.Errorf("%s: member %d was written", level, i)
			}
		}
		a, err = Open(paths, CreateSpec{Level: -1}, false)
		if err != nil {
			t.Fatalf("%s: assemble: %v", level, err)
		}
		if s := a.Status(); s.Level != level.String() || s.Layout != engine.RightSymmetric.String() {
			t.Errorf("%s: assembled as %s %s", level, s.Level, s.Layout)
		}
		a.Close()
	}
}
