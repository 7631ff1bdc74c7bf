package array

import (
	"bytes"
	"math/rand"
	randv2 "math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/array/memdev"
	"github.com/ublk-raid/ublk-raid/engine"
)

// TestForceUpRefusedLeavesPromotedMember: Found by review. A forced
// assembly emptied the write-hole log area of the member it put in sync
// as it is (Promoted) before the log replay, which can still refuse the
// assembly: a refused management command changed a member's bytes. raid5
// of 3 whose role 2 dropped out by I/O errors (its superblock as it was)
// and whose role 1 a power cut then took; add --force of roles 0 and 2
// would put role 2 in sync as it is, but role 0's log area cannot be
// read and role 0 cannot be failed (the array needs it): refused, with
// both members as they were.
func TestForceUpRefusedLeavesPromotedMember(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	rack := memdev.NewRack(randv2.New(randv2.NewPCG(7, 9)))
	paths := []string{"/r0", "/r1", "/r2"}
	const size = 16 << 20
	for _, p := range paths {
		rack.AddDisk(p, size)
	}
	open := func(p string) (Device, error) { return rack.Open(p) }
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ParityLayout: engine.LeftSymmetric, ChunkSectors: 16, AssumeClean: true, OpenDevice: open}, true)
	if err != nil {
		t.Fatal(err)
	}
	const span = 8 * 32
	old := make([]byte, span<<9)
	rng.Read(old)
	pWriteOne(t, rng, a, 0, old)
	d2 := rack.Disk(paths[2])
	keep := rack.Current(d2, 0, size)
	if err := a.Fail(2); err != nil {
		t.Fatal(err)
	}
	rack.Preload(d2, 0, keep)
	neu := make([]byte, span/2<<9)
	rng.Read(neu)
	pWriteOne(t, rng, a, 0, neu)
	logOff, logBytes := int64(a.logOffset), int64(a.logBytes)
	a.Close() // power cut; role 1 lost with it

	if zero := bytes.Count(rack.Current(d2, logOff, int(logBytes)), []byte{0}) == int(logBytes); zero {
		t.Fatal("role 2's log area is empty: the test proves nothing")
	}
	rack.SetFaults(rack.Disk(paths[0]), memdev.Fault{Ops: memdev.OpRead, Off: logOff, Len: logBytes, Err: unix.EIO})
	before := [][]byte{rack.Current(rack.Disk(paths[0]), 0, size), rack.Current(d2, 0, size)}
	give := []string{paths[0], paths[2]}
	x, err := Open(give, CreateSpec{Level: -1, Force: true, OpenDevice: open}, false)
	if err == nil {
		x.Close()
		t.Fatal("forced assembly started although role 0's log area cannot be read")
	}
	t.Logf("refused: %v", err)
	after := [][]byte{rack.Current(rack.Disk(paths[0]), 0, size), rack.Current(d2, 0, size)}
	for i, p := range give {
		if !bytes.Equal(before[i], after[i]) {
			n := 0
			for j := range before[i] {
				if before[i][j] != after[i][j] {
					n++
				}
			}
			t.Errorf("refused forced assembly changed %s (%d bytes differ)", p, n)
		}
	}
}
