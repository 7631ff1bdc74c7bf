package array

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// aliasDev is a second device node for storage already open under
// another path: as a multipath path (/dev/sdb and /dev/sdc for one LUN
// without dm-multipath) or /dev/loop0 set up over a spare file. Its own
// open succeeds (a different device number), so neither O_EXCL, flock
// nor the daemon's device keys tell it is the same storage.
type aliasDev struct {
	*memdev.Dev
	props ublk.MemberProps
}

func (d aliasDev) Props() *ublk.MemberProps { return &d.props }
func (d aliasDev) Close() error             { return nil }

// aliasOpen is an OpenDevice over a rack of in-memory disks (paths) that
// also opens "/dev/alias-of-"+base(target) as a second node of the disk
// at target (opened first, under its own path).
func aliasOpen(seed uint64, paths []string, target string) OpenDevice {
	rack := memdev.NewRack(rand.New(rand.NewPCG(seed, seed)))
	for _, p := range paths {
		rack.AddDisk(p, 8<<20)
	}
	var held *memdev.Dev
	alias := "/dev/alias-of-" + strings.TrimPrefix(target, "/")
	return func(p string) (Device, error) {
		if p == alias {
			props := *held.Props()
			props.Path = p
			return aliasDev{Dev: held, props: props}, nil
		}
		d, err := rack.Open(p)
		if p == target && err == nil {
			held = d
		}
		return d, err
	}
}

// A spare the array holds is added again through another node of the
// same storage: its superblock names it a spare of this array, which
// checkNewDevice takes for "a spare this array let go" and accepts as
// blank, without --force and without comparing its member UUID with the
// spares the array holds. The array then holds one device as two spares
// (the second's superblock write overwrote the first's); both can be
// activated into two roles and rebuilt over each other. Found by review;
// a device whose superblock's member UUID is one the array holds is
// refused (Array.heldAs).
func TestHeldSpareRefusedUnderAnotherNode(t *testing.T) {
	open := aliasOpen(6, []string{"/m0", "/m1", "/m2", "/s0"}, "/s0")
	a, err := Open([]string{"/m0", "/m1", "/m2"}, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true,
		Spares: []string{"/s0"}, OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.Spares(); len(got) != 1 {
		t.Fatalf("setup: spares %v", got)
	}
	err = a.AddSpares([]string{"/dev/alias-of-s0"}, false)
	if err == nil {
		t.Errorf("add-spare (no --force) of held spare /s0 under another node: accepted; spares now %v (one storage twice)", a.Spares())
	}
}

// As above with replace --with (no --force): the held spare's storage,
// named through another node, is put into role 2 and rebuilt while the
// array still holds it as a spare (a later failure activates that spare
// over the member).
func TestHeldSpareRefusedAsReplacementUnderAnotherNode(t *testing.T) {
	open := aliasOpen(7, []string{"/m0", "/m1", "/m2", "/s0"}, "/s0")
	a, err := Open([]string{"/m0", "/m1", "/m2"}, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true,
		Spares: []string{"/s0"}, OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = a.ReplaceMember(2, "/dev/alias-of-s0", false)
	a.WaitSync()
	if err == nil {
		t.Errorf("replace role 2 --with held spare /s0 under another node (no --force): accepted; spares %v, role 2 %s",
			a.Spares(), a.Status().Members[2].Path)
	}
}

// A member in a role named through another node, with --force (which the
// "was role N: use re-add" refusal mentions), must not be taken as a new
// device for another role: it would be rebuilt over while it serves.
func TestHeldMemberRefusedUnderAnotherNodeEvenForced(t *testing.T) {
	open := aliasOpen(8, []string{"/m0", "/m1", "/m2"}, "/m1")
	a, err := Open([]string{"/m0", "/m1", "/m2"}, CreateSpec{Level: engine.Level1, AssumeClean: true, NoBitmap: true, OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.ReplaceMember(2, "/dev/alias-of-m1", true); err == nil {
		a.WaitSync()
		t.Fatalf("replace role 2 --with role 1's device under another node, forced: accepted; role 2 %s", a.Status().Members[2].Path)
	}
	if err := a.AddSpares([]string{"/dev/alias-of-m1"}, true); err == nil {
		t.Fatalf("add-spare --force of role 1's device under another node: accepted; spares %v", a.Spares())
	}
}
