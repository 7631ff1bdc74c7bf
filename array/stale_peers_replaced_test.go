package array

import (
	"math/rand"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review: re-add and assembly refused such a member as a split
// brain (engine.Diverged could not tell it from a side that ran on).
//
// replaceAllButFailed: a 4-member raid6 whose member 3 failed; then
// members 0, 1 and 2 are each replaced in turn (one at a time, the array
// never losing more than two). Member 3 never ran on its own: it only
// missed writes. Returns the array, its paths now, and the failed path.
func replaceAllButFailed(t *testing.T) (*Array, []string, string, *queue, *pRing, []byte, *rand.Rand, *uint64) {
	rng := rand.New(rand.NewSource(11))
	const span = 2048
	a, paths, h, r, ref, id := servedParity(t, rng, engine.Level6, 4, span, false)
	// The device as it was when it dropped off (its superblock could not
	// take its own failure record: a member failed by I/O errors).
	img, err := os.ReadFile(paths[3])
	if err != nil {
		t.Fatal(err)
	}
	if err := pDo(h, r, func() error { return a.Fail(3) }); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[3], img, 0o600); err != nil {
		t.Fatal(err)
	}
	pBatch(t, rng, h, r, ref, span, id)
	fresh := memberFiles(t, 3, 16<<20)
	for role := range 3 {
		if err := pDo(h, r, func() error { return a.ReplaceMember(role, fresh[role], false) }); err != nil {
			t.Fatalf("replace %d: %v", role, err)
		}
		pWhileSync(t, rng, a, h, r, ref, span, id)
		if s := a.SyncStatus(); s.LastResult != "ok" {
			t.Fatalf("replace %d: %+v", role, s)
		}
	}
	now := []string{fresh[0], fresh[1], fresh[2], paths[3]}
	return a, now, paths[3], h, r, ref, rng, id
}

// md: a member that failed and missed writes is re-added from the bitmap
// (its events are not older than events_cleared: nothing was cleared
// while it was out), whoever holds the other roles now.
func TestReAddAfterOthersReplaced(t *testing.T) {
	a, _, old, h, r, ref, rng, id := replaceAllButFailed(t)
	defer func() { a.Close() }()
	if err := pDo(h, r, func() error { return a.ReAdd(old) }); err != nil {
		t.Fatalf("re-add of a member that only missed writes: %v", err)
	}
	pWhileSync(t, rng, a, h, r, ref, 2048, id)
	pReadAll(t, rng, h, r, ref, 2048)
}

// The same members assembled (the daemon's restart): the failed member is
// stale, not a split brain; the array starts.
func TestAssembleAfterOthersReplaced(t *testing.T) {
	a, now, _, _, _, _, _, _ := replaceAllButFailed(t)
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := Open(now, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatalf("assembly of the array with its stale failed member: %v", err)
	}
	defer b.Close()
	if st := b.Status(); st.ActiveDisks != 3 {
		t.Fatalf("status: %+v", st)
	}
}

// As the daemon's restart assembles it (SkipAbsent, AsRecorded: the
// state file lists the failed member, still held when the daemon
// stopped).
func TestRestoreSpecAfterOthersReplaced(t *testing.T) {
	a, now, _, _, _, _, _, _ := replaceAllButFailed(t)
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := Open(now, CreateSpec{SkipAbsent: true, AsRecorded: true}, false)
	if err != nil {
		t.Fatalf("restart of the array with its stale failed member: %v", err)
	}
	b.Close()
}
