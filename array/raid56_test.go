package array

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Creating a raid5/6 array is refused before any member is opened or
// written.
func TestParityCreateRefused(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6} {
		paths := memberFiles(t, 4, 64<<20)
		before := fileBytes(t, paths...)
		a, err := Open(paths, CreateSpec{Level: level, ParityLayout: engine.LeftSymmetric, ChunkSectors: 128}, true)
		if !errors.Is(err, ErrParityNotServed) || !strings.Contains(err.Error(), level.String()) {
			if a != nil {
				a.Close()
			}
			t.Fatalf("%s: Open = %v, want ErrParityNotServed naming the level", level, err)
		}
		for i, b := range fileBytes(t, paths...) {
			if !bytes.Equal(b, before[i]) {
				t.Errorf("%s: member %d was written", level, i)
			}
		}
	}
}

// Members carrying a raid5/6 array's superblocks are refused at assembly,
// with their superblocks (and everything else) untouched; asking to
// create another level over them names what they hold.
func TestParityAssembleRefused(t *testing.T) {
	for _, level := range []engine.Level{engine.Level5, engine.Level6} {
		paths := memberFiles(t, 5, 64<<20)
		spec := engine.ArraySpec{Name: "p", Level: uint32(level), Layout: uint32(engine.RightSymmetric), ChunkSectors: 128, BitmapBytes: 4096}
		for range paths {
			spec.MemberBytes = append(spec.MemberBytes, 64<<20)
		}
		sbs, err := engine.NewSuperblocks(spec)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range paths {
			b, err := sbs[i].MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(b, engine.SuperblockOffset); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		before := fileBytes(t, paths...)
		a, err := Open(paths, CreateSpec{Level: -1}, false)
		if !errors.Is(err, ErrParityNotServed) || !strings.Contains(err.Error(), `array "p" is `+level.String()) {
			if a != nil {
				a.Close()
			}
			t.Fatalf("%s: assemble = %v, want ErrParityNotServed", level, err)
		}
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
	}
}
