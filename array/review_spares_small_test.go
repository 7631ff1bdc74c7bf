package array

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. A spare that was not held while the array grew (absent at the start
// that preceded the grow, or removed first as grow asks) still carries
// this array's spare superblock. Given again at assembly, it is too
// small for the grown array: add-spare refuses it ("a spare needs at
// least"), a blank spare given at assembly is refused the same way
// (checkBlankSpare), and grow refuses while such a spare is held. An
// assembly that takes it as a spare lists a spare that can never take a
// role: the next failure leaves the array degraded with its "spare"
// idle.
func TestReviewSparesTooSmallSpareAfterGrowAssembled(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths[:2], CreateSpec{Level: engine.Level1, AssumeClean: true, Spares: paths[2:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveSpare(paths[2]); err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	growFiles(t, paths[:2], 40<<20)
	if a, err = Open(paths[:2], CreateSpec{}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Grow(0); err != nil {
		t.Fatal(err)
	}
	need := a.dataOffset + a.Engine.MemberSectors()<<9
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if fi, _ := os.Stat(paths[2]); uint64(fi.Size()) >= need {
		t.Fatalf("test setup: the old spare (%d bytes) is not smaller than the grown array needs (%d)", fi.Size(), need)
	}

	b, err := Open(paths[:2], CreateSpec{Spares: paths[2:]}, false)
	if err != nil {
		if strings.Contains(err.Error(), "needs at least") {
			return // refused, as a blank spare would be
		}
		t.Fatalf("assembly with a too small spare: %v", err)
	}
	defer b.Close()
	if sp := b.Spares(); len(sp) != 0 {
		activated := make(chan error, 1)
		b.OnSpareActivated = func(role int, path string, err error) { activated <- err }
		if err := b.Fail(1); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-activated:
			t.Fatalf("assembly took %s (%d bytes) as a spare of an array that needs %d bytes of each member; after role 1 failed its activation: %v",
				paths[2], fileSize(t, paths[2]), need, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("assembly took %s (%d bytes) as a spare of an array that needs %d bytes of each member (listed: %v)", paths[2], fileSize(t, paths[2]), need, sp)
		}
	}
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
