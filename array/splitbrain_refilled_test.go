package array

import (
	"errors"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Raid1 A, B. B drops out by an I/O error (its own superblock never
// says so), A records it failed and S replaces it; later B is started
// alone and written for more generations than A and S ran. Given
// together, the sides ran without each other: a split brain, refused,
// not resolved by the events (A and S's writes silently dropped).
func TestSplitBrainAfterRoleRefilled(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20) // A, B, S
	a := newRAID1(t, paths[:2])
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	userWrite(t, a, paths, 0, 4<<20, 0x01) // P1
	bsb := fileBytes(t, paths[1])[0][engine.SuperblockOffset : engine.SuperblockOffset+engine.SuperblockSize]
	if err := a.Fail(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(1, paths[2]); err != nil {
		t.Fatal(err)
	}
	a.StartBackground()
	a.WaitSync()
	userWrite(t, a, []string{paths[0], paths[2]}, 0, 4<<20, 0x02) // P2 on A and S
	stop(t, a)
	// B's superblock never saw its failure (an I/O error, not `fail`).
	f, err := os.OpenFile(paths[1], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bsb, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// B started alone, written to, for more generations than A's side.
	for superblockOf(t, paths[1]).Events <= superblockOf(t, paths[0]).Events {
		b := run(t, paths[1:2], CreateSpec{})
		userWrite(t, b, []string{"", paths[1]}, 0, 4<<20, 0x03) // P3 on B only
		stop(t, b)
	}
	c, err := Open(paths, CreateSpec{}, false)
	if err == nil {
		defer c.Close()
		st := c.Engine.State()
		var data []byte
		for r, m := range st.Members {
			if m.State == engine.MemberActive {
				data = dataOf(t, c, c.Members[r].Path)[:4096]
			}
		}
		t.Fatalf("assembled without a split-brain refusal: roles %+v, stale/left out: A and S; array data reads %#x (B's side), A+S's writes (0x02) silently dropped",
			st.Members, data[0])
	}
	if !errors.Is(err, engine.ErrSplitBrain) {
		t.Fatalf("assembly: %v, want a split brain", err)
	}

}
