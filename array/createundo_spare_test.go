package array

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review (cu): a create with a spare (`add --level 1 m0 m1
// --spare s0`) whose dirty mark fails on m1 (SetClean(false) fails the
// member and goes on) activated the spare at once and started its
// rebuild, before the caller had its device. The driver then refused the
// device: the rebuild's writes to the spare went through memberIO, not
// Member.WriteAt, and were never saved (the spare's data area held m0's
// old bytes), and m1 was closed before its undo. A spare now waits for
// KeepCreated.
func TestRefusedCreateActivatesNoSpare(t *testing.T) {
	rack := memdev.NewRack(rand.New(rand.NewPCG(4, 4)))
	const size = 8 << 20
	paths := []string{"/m0", "/m1", "/s0"}
	disks := map[string]*memdev.Disk{}
	orig := map[string][]byte{}
	r := rand.New(rand.NewPCG(5, 5))
	for _, p := range paths {
		disks[p] = rack.AddDisk(p, size)
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		rack.Preload(disks[p], 0, b)
		orig[p] = b
	}
	spec := CreateSpec{Undoable: true, Level: engine.Level1, NoBitmap: true, Spares: []string{"/s0"},
		OpenDevice: func(p string) (Device, error) { return rack.Open(p) }}
	a, err := Open([]string{"/m0", "/m1"}, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	activated := make(chan error, 1)
	a.Configure(func() {
		a.OnSpareActivated = func(role int, path string, err error) { activated <- err }
	})
	// The dirty mark's write fails on m1 (once: the undo's writes go through).
	rack.SetFaults(disks["/m1"], memdev.Fault{Ops: memdev.OpWrite, Err: errors.New("injected write error")})
	serr := a.SetClean(false)
	rack.SetFaults(disks["/m1"])
	t.Logf("dirty mark: %v; members %+v", serr, a.Status().Members)
	select {
	case err := <-activated:
		t.Fatalf("spare activated (%v) while the create could still be undone", err)
	default:
	}
	a.WaitSync()
	// The device is refused (as the daemon's start and run do).
	uerr := a.CloseUndoCreated()
	t.Logf("undo: %v", uerr)
	for _, p := range paths {
		got := rack.Current(disks[p], 0, size)
		if bytes.Equal(got, orig[p]) {
			continue
		}
		first, n := -1, 0
		for i := range got {
			if got[i] != orig[p][i] {
				if first < 0 {
					first = i
				}
				n++
			}
		}
		t.Errorf("refused create (undo error: %v) left %s changed: %d bytes differ, the first at byte %d", uerr, p, n, first)
	}
}

// Kept, the same array activates the spare the failed dirty mark called
// for.
func TestKeptCreateActivatesDueSpare(t *testing.T) {
	rack := memdev.NewRack(rand.New(rand.NewPCG(4, 4)))
	const size = 8 << 20
	disks := map[string]*memdev.Disk{}
	for _, p := range []string{"/m0", "/m1", "/s0"} {
		disks[p] = rack.AddDisk(p, size)
	}
	spec := CreateSpec{Undoable: true, Level: engine.Level1, NoBitmap: true, Spares: []string{"/s0"},
		OpenDevice: func(p string) (Device, error) { return rack.Open(p) }}
	a, err := Open([]string{"/m0", "/m1"}, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	activated := make(chan error, 1)
	a.Configure(func() {
		a.OnSpareActivated = func(role int, path string, err error) { activated <- err }
	})
	rack.SetFaults(disks["/m1"], memdev.Fault{Ops: memdev.OpWrite, Err: errors.New("injected write error")})
	a.SetClean(false)
	rack.SetFaults(disks["/m1"])
	a.KeepCreated()
	if err := <-activated; err != nil {
		t.Fatalf("spare not activated once the array was kept: %v", err)
	}
	a.WaitSync()
	if st := a.Status(); st.ActiveDisks != 2 {
		t.Fatalf("after the spare's rebuild: %+v", st.Members)
	}
}
