package array

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/probe/probetest"
)

// fillRandom gives each file pseudo-random contents (what a disk holds
// before a create), so that a write a refused create leaves shows.
func fillRandom(t *testing.T, seed uint64, paths ...string) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, fi.Size())
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A new array whose device is refused (CloseUndoCreated: the daemon's add
// and run when ublk.Create fails) leaves its members byte for byte as
// they were before the create: signatures a forced create erased, the
// superblocks, the bitmap, the raid5/6 log headers, the dirty mark.
func TestCloseUndoCreatedRestoresMembers(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		spec CreateSpec
	}{
		{"raid1 bitmap spare", 3, CreateSpec{Undoable: true, Level: engine.Level1, RegionSectors: testRegion}},
		{"raid10 no bitmap", 4, CreateSpec{Undoable: true, Level: engine.Level10, Layout: engine.LayoutN2, NoBitmap: true}},
		{"raid5 log bitmap", 4, CreateSpec{Undoable: true, Level: engine.Level5, ParityLayout: engine.LeftSymmetric, ChunkSectors: 128, RegionSectors: testRegion}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := memberFiles(t, tc.n, 16<<20)
			fillRandom(t, uint64(tc.n), paths...)
			probetest.Write(t, paths[0], "ext4")
			probetest.Write(t, paths[1], "md1.0")
			before := contents(t, paths...)
			spec := tc.spec
			spec.Force = true
			members := paths
			if tc.spec.Level == engine.Level1 {
				members, spec.Spares = paths[:2], paths[2:]
			}
			a, err := Open(members, spec, true)
			if err != nil {
				t.Fatal(err)
			}
			if !a.Created {
				t.Fatal("not created")
			}
			if err := a.SetClean(false); err != nil {
				t.Fatal(err)
			}
			if err := a.CloseUndoCreated(); err != nil {
				t.Fatal(err)
			}
			unchanged(t, "create undone", paths, before)
		})
	}
}

// Once kept (its device serves it), a new array stays on its members:
// CloseUndoCreated is Close, and the members assemble.
func TestKeepCreatedKeepsTheArray(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Undoable: true, Level: engine.Level1, RegionSectors: testRegion}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	a.KeepCreated()
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	if err := a.CloseUndoCreated(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatalf("assembly after a kept create: %v", err)
	}
	b.Close()
}

// A create whose writes fail on one member part way (the others written
// already, and this one's first writes taken) is refused with every
// member as it was.
func TestCreateFailingWriteLeavesMembers(t *testing.T) {
	for taken := range 3 {
		paths := memberFiles(t, 4, 16<<20)
		fillRandom(t, 7, paths...)
		probetest.Write(t, paths[0], "ext4")
		before := contents(t, paths...)
		spec := CreateSpec{Level: engine.Level5, ParityLayout: engine.LeftSymmetric, ChunkSectors: 128, Force: true,
			OpenDevice: func(p string) (Device, error) {
				d, err := openFile(p)
				if err != nil || p != paths[2] {
					return d, err
				}
				return &nthWriteFailDev{Device: d, ok: taken}, nil
			}}
		if _, err := Open(paths, spec, true); err == nil {
			t.Fatalf("create succeeded with a member failing write %d", taken)
		}
		unchanged(t, fmt.Sprintf("create failed after %d writes taken", taken), paths, before)
	}
}

// nthWriteFailDev takes ok writes, fails the next one, then takes them
// again (a transient error: the undo's writes go through).
type nthWriteFailDev struct {
	Device
	ok int
	n  atomic.Int32
}

func (d *nthWriteFailDev) WriteAt(p []byte, off int64) error {
	if int(d.n.Add(1)) == d.ok+1 {
		return errors.New("injected write error")
	}
	return d.Device.WriteAt(p, off)
}

func (d *nthWriteFailDev) WriteAtDurable(p []byte, off int64) error {
	if int(d.n.Add(1)) == d.ok+1 {
		return errors.New("injected write error")
	}
	return d.Device.WriteAtDurable(p, off)
}

// Without Undoable (every caller but the daemon's add and run) the new
// array is kept as Open returns: nothing saves what its writes replace,
// and a spare a failure calls for is activated at once.
func TestCreateNotUndoableIsKept(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, RegionSectors: testRegion}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range a.Members {
		if m.undo.Load() != nil {
			t.Errorf("%s: writes still saved after Open without Undoable", m.Path)
		}
	}
	if err := a.CloseUndoCreated(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatalf("assembly: %v", err)
	}
	b.Close()
}
