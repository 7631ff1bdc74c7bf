package array

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// TestReviewFixesCreateAliasMembers: Found by review: the sibling of
// TestReviewReaddAliasSparesOneCall (4418c80). A create naming the same
// storage twice (two nodes of one disk) passes every check, no device
// carrying a superblock yet: the one storage takes two roles of a raid5,
// and a write to one role's chunk overwrites the other's. add-spare now
// refuses this (Array.distinctSpares); create does not.
func TestReviewFixesCreateAliasMembers(t *testing.T) {
	open := aliasOpen(11, []string{"/m0", "/m1", "/m2"}, "/m1")
	a, err := Open([]string{"/m0", "/m1", "/dev/alias-of-m1"}, CreateSpec{Level: engine.Level5, ChunkSectors: 128, AssumeClean: true, NoBitmap: true,
		OpenDevice: open}, true)
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	defer a.Close()
	rng := rand.New(rand.NewSource(1))
	// The first stripe: role 0 holds sectors 0..127, role 1 128..255 (or
	// parity); whichever two data chunks fall on roles 1 and 2 share the
	// storage.
	const chunk = 128
	want := make([]byte, 2*chunk<<9)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	pWriteOne(t, rng, a, 0, want)
	got := pReadOne(t, rng, a, 0, 2*chunk)
	st := a.Status()
	if !bytes.Equal(got, want) || st.Members[1].Path != st.Members[2].Path {
		t.Fatalf("create of a raid5 over /m0, /m1 and another node of /m1: accepted (roles 1 %s, 2 %s); the first stripe written reads back equal: %v",
			st.Members[1].Path, st.Members[2].Path, bytes.Equal(got, want))
	}
}
