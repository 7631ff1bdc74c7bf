package array

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/probe"
	"github.com/ublk-raid/ublk-raid/probe/probetest"
)

// contents reads each file of paths.
func contents(t *testing.T, paths ...string) [][]byte {
	t.Helper()
	out := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func unchanged(t *testing.T, what string, paths []string, before [][]byte) {
	t.Helper()
	for i, b := range contents(t, paths...) {
		if !bytes.Equal(b, before[i]) {
			t.Errorf("%s: %s was written", what, paths[i])
		}
	}
}

// onlyOurs fails unless the only signature on path is a ublk-raid
// superblock: a forced overwrite erased what was there.
func onlyOurs(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := probe.Detect(f, fi.Size())
	if err != nil || len(sigs) != 1 || sigs[0].Type != "ublk-raid superblock" {
		t.Errorf("%s after a forced overwrite: %v %v; want only the ublk-raid superblock", path, sigs, err)
	}
}

// A new array over a device that holds data is refused with nothing
// written; Force creates it.
func TestCreateOverSignatureNeedsForce(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20)
	probetest.Write(t, paths[1], "ext4")
	probetest.Write(t, paths[2], "md1.0")
	before := contents(t, paths...)
	_, err := Open(paths[:2], CreateSpec{Level: engine.Level1}, true)
	if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), paths[1]+" carries ext4 filesystem") {
		t.Fatalf("create over ext4: %v", err)
	}
	_, err = Open([]string{paths[0], paths[1]}, CreateSpec{Level: engine.Level1, Spares: paths[2:], Force: false}, true)
	if !errors.Is(err, ErrSignature) {
		t.Fatalf("create over ext4 with an md spare: %v", err)
	}
	_, err = Open([]string{paths[0], paths[3]}, CreateSpec{Level: engine.Level1, Spares: paths[2:3]}, true)
	if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), paths[2]+" carries md superblock 1.0") {
		t.Fatalf("create with an md spare: %v", err)
	}
	unchanged(t, "refused create", paths, before)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, Spares: paths[2:3], Force: true}, true)
	if err != nil {
		t.Fatalf("create with force: %v", err)
	}
	defer a.Close()
	if !a.Created || len(a.Spares()) != 1 {
		t.Fatalf("forced create: created %v spares %v", a.Created, a.Spares())
	}
	onlyOurs(t, paths[1])
	onlyOurs(t, paths[2])
}

// ReplaceMember fails an active member only once the new device passed
// every check; a refusal leaves the array and every device as they were.
func TestReplaceMemberChecksBeforeFailing(t *testing.T) {
	paths := memberFiles(t, 5, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	probetest.Write(t, paths[2], "lvm2")
	other, err := Open(paths[3:5], CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	other.SetClean(true)
	other.Close()
	small := memberFiles(t, 1, 4<<20)[0]
	all := append(append([]string(nil), paths...), small)
	before, events := contents(t, all...), a.Status().Events
	for _, tc := range []struct{ with, want string }{
		{paths[2], "LVM2 physical volume"},
		{paths[3], "superblock of array"},
		{small, "needs at least"},
		{paths[0], "already holds role 0"},
	} {
		if err := a.ReplaceMember(1, tc.with, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("replace with %s: %v; want %q", tc.with, err, tc.want)
		}
	}
	unchanged(t, "refused replace", all, before)
	if st := a.Status(); st.Events != events || st.ActiveDisks != 2 || heldOpen(t, paths[2]) || heldOpen(t, paths[3]) || heldOpen(t, small) {
		t.Fatalf("refused replace changed the array: %+v", st)
	}
	// Forced: the LVM device takes role 1 from its active member.
	if err := a.ReplaceMember(1, paths[2], true); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	waitFor(t, "the new member is active", func() bool { return a.Status().ActiveDisks == 2 })
	if st := a.Status(); st.Members[1].Path != paths[2] || heldOpen(t, paths[1]) {
		t.Fatalf("after replace: %+v (old member held: %v)", st.Members[1], heldOpen(t, paths[1]))
	}
	if !bytes.Equal(dataOf(t, a, paths[2]), dataOf(t, a, paths[0])) {
		t.Fatal("copies differ after replace")
	}
	onlyOurs(t, paths[2])
}

// Replacing the only in-sync copy is refused before anything is written.
func TestReplaceMemberLastCopy(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fail(0); err != nil {
		t.Fatal(err)
	}
	before, events := contents(t, paths...), a.Status().Events
	if err := a.ReplaceMember(1, paths[2], false); err == nil || !strings.Contains(err.Error(), "last copy") {
		t.Fatalf("replace of the last copy: %v", err)
	}
	unchanged(t, "refused replace", paths, before)
	if st := a.Status(); st.Events != events || st.Members[1].State != "active" || heldOpen(t, paths[2]) {
		t.Fatalf("refused replace changed the array: %+v", st)
	}
}

// A spare named by ReplaceMember takes an active member's role.
func TestReplaceMemberWithSpare(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.ReplaceMember(0, paths[2], false); err != nil {
		t.Fatal(err)
	}
	a.WaitSync()
	waitFor(t, "the spare is active", func() bool { return a.Status().ActiveDisks == 2 })
	if st := a.Status(); st.Members[0].Path != paths[2] || len(st.Spares) != 0 {
		t.Fatalf("after replace with the spare: %+v", st)
	}
}

// Spares given at assembly are all checked before the first is written;
// a level that contradicts the members is refused before any is.
func TestAssemblySparesCheckedFirst(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	small := memberFiles(t, 1, 4<<20)[0]
	probetest.Write(t, paths[3], "btrfs")
	all := append(append([]string(nil), paths...), small)
	before := contents(t, all...)
	for _, tc := range []struct {
		spec   CreateSpec
		create bool
		want   string
	}{
		{CreateSpec{Level: engine.Level0, Spares: paths[2:3]}, true, "hold a raid1 array; level 0"},
		{CreateSpec{Level: -1, Spares: []string{paths[2], small}}, false, "needs at least"},
		{CreateSpec{Level: -1, Spares: paths[2:4]}, false, "btrfs filesystem"},
	} {
		if _, err := Open(paths[:2], tc.spec, tc.create); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.spec, err, tc.want)
		}
		unchanged(t, "refused assembly", all, before)
	}
}

// Force at assembly takes a blank spare that holds data.
func TestAssemblySpareForce(t *testing.T) {
	paths := memberFiles(t, 4, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	probetest.Write(t, paths[3], "btrfs")
	b, err := Open(paths[:2], CreateSpec{Level: -1, Spares: paths[2:4], Force: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if sp := b.Spares(); len(sp) != 2 {
		t.Fatalf("spares %v", sp)
	}
	onlyOurs(t, paths[3])
}

// AddSpareForce takes a device that AddSpare refuses.
func TestAddSpareForce(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	probetest.Write(t, paths[2], "gpt")
	before := contents(t, paths[2])
	if err := a.AddSpare(paths[2]); !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), "GPT partition table") {
		t.Fatalf("add spare over a GPT: %v", err)
	}
	unchanged(t, "refused spare", paths[2:], before)
	if err := a.AddSpareForce(paths[2], true); err != nil {
		t.Fatal(err)
	}
	if sp := a.Spares(); len(sp) != 1 || sp[0] != paths[2] {
		t.Fatalf("spares %v", sp)
	}
	onlyOurs(t, paths[2]) // the backup GPT header at the end too
}

// Like mdadm, creation warns when the largest member exceeds what the
// array uses of each by more than 1%.
func TestUnusedSpaceWarning(t *testing.T) {
	big, small := memberFiles(t, 1, 64<<20)[0], memberFiles(t, 1, 32<<20)[0]
	a, err := Open([]string{big, small}, CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], "largest member "+big) || !strings.Contains(a.Warnings[0], "unused") {
		t.Fatalf("warnings %q", a.Warnings)
	}
	near := memberFiles(t, 2, 32<<20)
	if err := os.Truncate(near[1], 32<<20+64<<10); err != nil { // 0.2% larger
		t.Fatal(err)
	}
	b, err := Open(near, CreateSpec{Level: engine.Level1}, true)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if len(b.Warnings) != 0 {
		t.Fatalf("warnings for members within 1%%: %q", b.Warnings)
	}
}

// Creating over devices whose superblocks make no one array (one of
// another array, one blank) is refused, with the way to force it; forced,
// the new array is created.
func TestCreateOverAnotherArraysMember(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	o, err := Open(paths[:2], CreateSpec{Name: "old", Level: engine.Level1, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	o.SetClean(true)
	o.Close()
	members := []string{paths[1], paths[2]}
	before := contents(t, members...)
	_, err = Open(members, CreateSpec{Level: engine.Level1}, true)
	if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), paths[2]) {
		t.Fatalf("create over another array's member: %v", err)
	}
	unchanged(t, "refused create", members, before)
	a, err := Open(members, CreateSpec{Name: "new", Level: engine.Level1, Force: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if st := a.Status(); !a.Created || st.Name != "new" || st.ActiveDisks != 2 {
		t.Fatalf("forced create: created %v %+v", a.Created, st)
	}
}

// writeFailDev fails every write: a new device that cannot be written.
type writeFailDev struct{ Device }

func (d writeFailDev) WriteAt(p []byte, off int64) error { return errors.New("injected write error") }
func (d writeFailDev) WriteAtDurable(p []byte, off int64) error {
	return errors.New("injected write error")
}

// A replace onto a device that takes no write fails before the member it
// replaces is failed: the array keeps both copies, as for any refused
// replace. Forced over signatures, their erasure is the first write (it
// used to come after the old member was failed); without signatures to
// erase, the superblock block is written back first (the replace used to
// answer success, with the old member failed and the new one failed at
// its first superblock write: the array degraded, nothing replaced).
func TestReplaceOntoUnwritableDeviceKeepsMember(t *testing.T) {
	for _, signatures := range []bool{true, false} {
		paths := memberFiles(t, 3, 16<<20)
		if signatures {
			probetest.Write(t, paths[2], "ext4")
		}
		spec := CreateSpec{Level: engine.Level1, NoBitmap: true, AssumeClean: true, OpenDevice: func(p string) (Device, error) {
			d, err := openFile(p)
			if err != nil || p != paths[2] {
				return d, err
			}
			return writeFailDev{d}, nil
		}}
		a, err := Open(paths[:2], spec, true)
		if err != nil {
			t.Fatal(err)
		}
		before, events := contents(t, paths...), a.Status().Events
		if err := a.ReplaceMember(1, paths[2], signatures); err == nil {
			t.Errorf("signatures %v: replace onto a device that fails every write succeeded", signatures)
		}
		a.WaitSync()
		if st := a.Status(); st.Events != events || st.ActiveDisks != 2 || st.Members[1].Path != paths[1] {
			t.Fatalf("signatures %v: a replace onto an unwritable device degraded the array: %+v", signatures, st)
		}
		unchanged(t, "refused replace", paths, before)
		a.Close()
	}
}
