package array

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. Review (fixtwo, 85bb0a8): ReadSuperblock now returns the shadow's read
// error, not ErrCorruptSuperblock, when a primary that fails its
// checksum has a shadow that "cannot be read". But the shadow's place
// comes from the failed primary's own layout fields, not bounded by the
// device: a damaged superblock (magic intact, checksum failing, its data
// offset garbage) places the shadow past the device's end, the read
// comes back short, and the damaged superblock is reported as a device
// that cannot be read. create --level --force, which overwrites members
// whose superblocks are damaged (ErrCorruptSuperblock: foreign), now
// refuses such a device with a read error; before 85bb0a8 it was
// classified corrupt.
func TestReviewFixtwoDamagedSuperblockTakenForReadError(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	a := newRAID1(t, paths)
	stop(t, a)
	// Damage member 1's superblock: its data offset field becomes 1 TiB
	// (the checksum no longer matches; the magic stays).
	f, err := os.OpenFile(paths[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var v [8]byte
	binary.LittleEndian.PutUint64(v[:], 1<<40)
	if _, err := f.WriteAt(v[:], engine.SuperblockOffset+104); err != nil {
		t.Fatal(err)
	}
	f.Close()

	m, err := openMember(nil, paths[1])
	if err != nil {
		t.Fatal(err)
	}
	_, _, rerr := engine.ReadSuperblock(m.ReadBlock, m.Size)
	m.Close()
	if !errors.Is(rerr, engine.ErrCorruptSuperblock) {
		t.Errorf("a damaged superblock (checksum fails, data offset 1 TiB on a 16 MiB device) reads as: %v; want an error wrapping ErrCorruptSuperblock, not a read error", rerr)
	}
	b, err := Open(paths, CreateSpec{Name: "new", Level: engine.Level1, AssumeClean: true, Force: true}, true)
	if err != nil {
		t.Fatalf("create --level 1 --force over members one of which has a damaged superblock: %v", err)
	}
	b.Close()
}
