package array

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/bitmap"
	"github.com/ublk-raid/ublk-raid/engine"
)

// Byte offsets of superblock fields (engine/superblock.go's format).
const (
	sbOffChecksum     = 12
	sbOffMembers      = 32
	sbOffDataOffset   = 104
	sbOffDataSectors  = 112
	sbOffBitmapOffset = 120
	sbOffBitmapBytes  = 128
	sbOffEvents       = 136
	sbOffRoles        = 256
)

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// sealBlock stores the CRC-32C of b (with the 4 bytes at off taken as
// zero) at off: what a crafted block needs to pass its checksum.
func sealBlock(b []byte, off int) {
	binary.LittleEndian.PutUint32(b[off:], 0)
	binary.LittleEndian.PutUint32(b[off:], crc32.Checksum(b, castagnoliTable))
}

// craftSB edits the raw superblock of the member file at path and reseals
// its checksum, bypassing every validation (like an attacker with a hex
// editor would).
func craftSB(t *testing.T, path string, edit func(b []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, engine.SuperblockSize)
	if _, err := f.ReadAt(b, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	edit(b)
	sealBlock(b, sbOffChecksum)
	if _, err := f.WriteAt(b, engine.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
}

// craftBitmapHeader edits the raw bitmap header block (bs bytes at off) of
// the member file at path and reseals its checksum.
func craftBitmapHeader(t *testing.T, path string, off int64, bs int, edit func(b []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, bs)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	if string(b[:8]) != bitmap.Magic {
		t.Fatalf("no bitmap header at byte %d of %s", off, path)
	}
	edit(b)
	sealBlock(b, 12)
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// fileState is a member file's size and, unless it grew past what the
// tests create (a write past the device's end grows a file), its hash.
type fileState struct {
	size int64
	sum  [32]byte
}

func fileHashes(t *testing.T, paths []string) []fileState {
	t.Helper()
	var out []fileState
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		fs := fileState{size: st.Size()}
		if fs.size <= 1<<30 {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			fs.sum = sha256.Sum256(b)
		}
		out = append(out, fs)
	}
	return out
}

// newStoppedArray creates a raid1 with a bitmap on n file members of size
// bytes and stops it cleanly.
func newStoppedArray(t *testing.T, n int, size int64) []string {
	t.Helper()
	paths := memberFiles(t, n, size)
	a, err := Open(paths, CreateSpec{Name: "od", Level: engine.Level1, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	if a.Bitmap == nil {
		t.Fatal("the test array has no bitmap")
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	return paths
}

// refuseAssembly opens paths (which must fail with an error containing
// every one of want) and checks the member files did not change.
func refuseAssembly(t *testing.T, paths []string, want ...string) {
	t.Helper()
	before := fileHashes(t, paths)
	a, err := Open(paths, CreateSpec{}, false)
	if err == nil {
		g := a.Engine.Geo
		a.SetClean(true) // what a stop does
		a.Close()
		t.Errorf("assembled: %d sectors per member, %d in the array; want an error containing %q", g.MemberSectors, g.ArraySectors(), want)
	}
	for _, w := range want {
		if err != nil && !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	for i, h := range fileHashes(t, paths) {
		if h != before[i] {
			t.Errorf("refused assembly changed %s (%d bytes, now %d)", paths[i], before[i].size, h.size)
		}
	}
}

// Item 5: a superblock claiming more data than the device holds (2^30
// sectors, 512 GiB, on 16 MiB members) is refused, naming the member and
// the field, and nothing is written.
func TestAssembleRefusesDataPastDevice(t *testing.T) {
	paths := newStoppedArray(t, 2, 16<<20)
	for _, p := range paths {
		craftSB(t, p, func(b []byte) { binary.LittleEndian.PutUint64(b[sbOffDataSectors:], 1<<30) })
	}
	refuseAssembly(t, paths, paths[0], "data size of 1073741824 sectors", "past the member's end")
}

// Item 5: a data offset of 1 TiB on 16 MiB members is refused.
func TestAssembleRefusesDataOffsetPastDevice(t *testing.T) {
	paths := newStoppedArray(t, 2, 16<<20)
	for _, p := range paths {
		craftSB(t, p, func(b []byte) { binary.LittleEndian.PutUint64(b[sbOffDataOffset:], 1<<40) })
	}
	refuseAssembly(t, paths, paths[0], "data offset 1099511627776 is past the member's end")
}

// Item 5: a bitmap area inside a (crafted) reserved area but past the
// end of the device is refused, naming the bitmap area.
func TestAssembleRefusesBitmapPastDevice(t *testing.T) {
	paths := newStoppedArray(t, 2, 16<<20)
	for _, p := range paths {
		craftSB(t, p, func(b []byte) {
			binary.LittleEndian.PutUint64(b[sbOffDataOffset:], 1<<40)
			binary.LittleEndian.PutUint64(b[sbOffBitmapOffset:], 1<<39)
		})
	}
	refuseAssembly(t, paths, paths[0], "bitmap area at byte 549755813888", "past the member's end")
}

// Item 5 (and the bare "cannot allocate memory"): a 1 TiB bitmap area is
// refused with the member and the field named, not read.
func TestAssembleRefusesHugeBitmapArea(t *testing.T) {
	paths := newStoppedArray(t, 2, 16<<20)
	for _, p := range paths {
		craftSB(t, p, func(b []byte) {
			binary.LittleEndian.PutUint64(b[sbOffDataOffset:], 2<<40)
			binary.LittleEndian.PutUint64(b[sbOffBitmapBytes:], 1<<40)
		})
	}
	refuseAssembly(t, paths, paths[0], "bitmap area of 1099511627776 bytes is larger than the maximum")
}

// Item 5: role counts past what the format (64) or the level (raid1: 16
// copies) allows are refused before anything is written.
func TestAssembleRefusesTooManyRoles(t *testing.T) {
	t.Run("past the role table", func(t *testing.T) {
		paths := newStoppedArray(t, 2, 16<<20)
		for _, p := range paths {
			craftSB(t, p, func(b []byte) { binary.LittleEndian.PutUint32(b[sbOffMembers:], engine.RoleTableSize+1) })
		}
		refuseAssembly(t, paths, paths[0], "member count 65 is not in 1..64")
	})
	t.Run("raid1 of 17", func(t *testing.T) {
		paths := newStoppedArray(t, 2, 16<<20)
		for _, p := range paths {
			craftSB(t, p, func(b []byte) {
				binary.LittleEndian.PutUint32(b[sbOffMembers:], 17)
				for r := 2; r < 17; r++ { // the other roles missing, no holder
					binary.LittleEndian.PutUint32(b[sbOffRoles+32*r:], uint32(engine.RoleMissing))
				}
			})
		}
		refuseAssembly(t, paths, "raid1 needs 2 to 16 members, not 17")
	})
}

// Item 9: events at 2^64-1 would wrap to 0 on the next update. Assembly
// refuses and writes nothing.
func TestAssembleRefusesEventsAtWrap(t *testing.T) {
	paths := newStoppedArray(t, 2, 16<<20)
	for _, p := range paths {
		craftSB(t, p, func(b []byte) { binary.LittleEndian.PutUint64(b[sbOffEvents:], math.MaxUint64) })
	}
	refuseAssembly(t, paths, paths[0], "events 18446744073709551615 is past the maximum")
}

// Item 9: at events 2^64-2 (valid, but the last value) the next update
// cannot be recorded: assembly refuses before writing anything (the
// bitmap's first batch would rewrite every copy).
func TestAssembleRefusesEventsAtMax(t *testing.T) {
	paths := newStoppedArray(t, 2, 16<<20)
	for _, p := range paths {
		craftSB(t, p, func(b []byte) { binary.LittleEndian.PutUint64(b[sbOffEvents:], uint64(math.MaxUint64-1)) })
	}
	refuseAssembly(t, paths, "events counter in the superblock of "+paths[0]+" is 18446744073709551614", "would wrap")
}

// Item 9, through the bitmap: a header whose events are at the maximum
// (far above the superblocks') is corrupt (a header is at most one
// update ahead): the bitmap is not trusted (every region dirty, as md
// treats a bitmap it cannot use) and the array's events stay the
// superblocks', so the next update does not wrap. (It was refused as a
// wrap; since review found one such header could move the events of an
// array whose other copies were fine, no header that far ahead is used.)
func TestAssembleBitmapEventsAtMaxIsCorrupt(t *testing.T) {
	paths := newStoppedArray(t, 2, 16<<20)
	ev := superblockOf(t, paths[0]).Events
	for _, p := range paths {
		sb := superblockOf(t, p)
		craftBitmapHeader(t, p, int64(sb.BitmapOffset), 4096, func(b []byte) {
			binary.LittleEndian.PutUint64(b[48:], uint64(math.MaxUint64-1))
		})
	}
	a, err := Open(paths, CreateSpec{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.BitmapInfo == nil || !a.BitmapInfo.AllDirty || !errors.Is(a.BitmapInfo.Err, bitmap.ErrCorrupt) {
		t.Fatalf("bitmap info %+v: want every region dirty, the headers corrupt", a.BitmapInfo)
	}
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	if got := a.SBs[0].Events; got > ev+2 {
		t.Errorf("events %d after one update from %d", got, ev)
	}
}

// The too-small error of a create names the device by its path.
func TestCreateTinyMemberNamesPath(t *testing.T) {
	paths := memberFiles(t, 2, 16<<20)
	if err := os.Truncate(paths[1], 1<<20); err != nil {
		t.Fatal(err)
	}
	before := fileHashes(t, paths)
	a, err := Open(paths, CreateSpec{Level: engine.Level1, ChunkSectors: 128}, true)
	if err == nil {
		a.Close()
		t.Fatal("created an array on a 1 MiB member")
	}
	if !strings.Contains(err.Error(), "member "+paths[1]+" is 1048576 bytes: too small") {
		t.Errorf("error %q does not name %s", err, paths[1])
	}
	for i, h := range fileHashes(t, paths) {
		if h != before[i] {
			t.Errorf("refused create changed %s", paths[i])
		}
	}
}

// Item 5: the array serves every member at one data offset (the freshest
// superblock's). A member whose own superblock puts its data elsewhere is
// refused: at the other offset a smaller member would be accessed past its
// end (here: the array's data at 16 MiB, and a 10 MiB member).
func TestAssembleRefusesMixedDataOffsets(t *testing.T) {
	paths := memberFiles(t, 2, 32<<20)
	if err := os.Truncate(paths[1], 10<<20); err != nil {
		t.Fatal(err)
	}
	a, err := Open(paths, CreateSpec{Name: "od", Level: engine.Level1, ChunkSectors: 128}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	craftSB(t, paths[0], func(b []byte) {
		binary.LittleEndian.PutUint64(b[sbOffDataOffset:], 16<<20) // (the data size as the others': a size that differs is refused first)
	})
	refuseAssembly(t, paths, "member "+paths[1]+": its superblock puts the data at byte 1048576", "the array's are at byte 16777216")
}
