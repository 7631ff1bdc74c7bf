package resync_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
)

// Members of the stack model (model_test.go): a store holds a member's
// bytes (in memory or in a file), a device wraps a store with injectable
// faults. The model decides when member operations complete; the device
// only says what they do.

// store is the backing storage of a member: a flat byte image, read and
// written at byte offsets (pread/pwrite for files).
type store interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Close() error
}

// memStore is an in-memory store.
type memStore struct{ b []byte }

func (s *memStore) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(s.b)) {
		return 0, fmt.Errorf("read of %d bytes at %d beyond the store (%d)", len(p), off, len(s.b))
	}
	return copy(p, s.b[off:]), nil
}

func (s *memStore) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(s.b)) {
		return 0, fmt.Errorf("write of %d bytes at %d beyond the store (%d)", len(p), off, len(s.b))
	}
	return copy(s.b[off:], p), nil
}

func (s *memStore) Close() error { return nil }

// fileStore is a store in a regular file; os.File's ReadAt and WriteAt
// are pread and pwrite.
type fileStore struct{ f *os.File }

func newFileStore(dir string, size int64) (*fileStore, error) {
	f, err := os.CreateTemp(dir, "member-*")
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	return &fileStore{f: f}, nil
}

func (s *fileStore) ReadAt(p []byte, off int64) (int, error)  { return s.f.ReadAt(p, off) }
func (s *fileStore) WriteAt(p []byte, off int64) (int, error) { return s.f.WriteAt(p, off) }

func (s *fileStore) Close() error {
	name := s.f.Name()
	err := s.f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// errIO is what a failed member operation returns (the executor gets
// -EIO); errTimedOut is a hung member's answer to the syncer, whose
// member I/O is synchronous (the device gives up eventually).
var (
	errIO       = syscall.EIO
	errTimedOut = syscall.ETIMEDOUT
)

// device is a member: a store with its data area at byte 0 (sectors
// relative to the data offset, as engine.MemberIO's) and the bitmap's
// reserved area after it, plus injectable faults.
type device struct {
	s       store
	serial  int    // which device this is, for messages
	sectors uint64 // data sectors
	// Faults: dead fails every operation; hung answers nothing (the model
	// keeps its operations pending; it is cleared by a power cycle); bad
	// lists data sectors whose reads fail until they are rewritten.
	dead, hung bool
	bad        map[uint64]bool
	// timedOut: an operation on it was given up after the member timeout
	// (until a power cycle). The executor keeps such a member when it
	// holds the last in-sync copy, as a dead one: the request fails.
	timedOut bool
}

func (d *device) String() string { return fmt.Sprintf("device #%d", d.serial) }

// broken reports whether the device cannot answer at all.
func (d *device) broken() bool { return d.dead || d.hung }

func (d *device) mustRead(p []byte, off int64) {
	if n, err := d.s.ReadAt(p, off); err != nil || n != len(p) {
		panic(fmt.Sprintf("%v: store read of %d bytes at %d: %d, %v", d, len(p), off, n, err))
	}
}

func (d *device) mustWrite(p []byte, off int64) {
	if n, err := d.s.WriteAt(p, off); err != nil || n != len(p) {
		panic(fmt.Sprintf("%v: store write of %d bytes at %d: %d, %v", d, len(p), off, n, err))
	}
}

func (d *device) checkRange(sector, n uint64) {
	if sector+n > d.sectors || n == 0 {
		panic(fmt.Sprintf("%v: I/O at data sectors %d+%d beyond %d", d, sector, n, d.sectors))
	}
}

// readData reads data sectors into p: fails if the device is dead or a
// sector is bad (hangs are the caller's business).
func (d *device) readData(p []byte, sector uint64) error {
	n := uint64(len(p) >> 9)
	d.checkRange(sector, n)
	if d.dead {
		return errIO
	}
	for s := sector; s < sector+n; s++ {
		if d.bad[s] {
			return errIO
		}
	}
	d.mustRead(p, int64(sector<<9))
	return nil
}

// writeData writes p at data sector sector; rewritten sectors are good
// again.
func (d *device) writeData(p []byte, sector uint64) error {
	n := uint64(len(p) >> 9)
	d.checkRange(sector, n)
	if d.dead {
		return errIO
	}
	d.mustWrite(p, int64(sector<<9))
	for s := sector; s < sector+n; s++ {
		delete(d.bad, s)
	}
	return nil
}

// zeroData writes n zero sectors at sector.
func (d *device) zeroData(sector, n uint64) error {
	return d.writeData(make([]byte, n<<9), sector)
}

// peek returns data sector s as stored, whatever the faults (checks).
func (d *device) peek(s uint64) []byte {
	p := make([]byte, 512)
	d.mustRead(p, int64(s<<9))
	return p
}

// writeRaw writes p at byte offset off (the bitmap's area).
func (d *device) writeRaw(p []byte, off uint64) error {
	if d.dead {
		return errIO
	}
	d.mustWrite(p, int64(off))
	return nil
}

// readRaw reads n bytes at byte offset off (the bitmap's area, at
// assembly); nil if the device is dead.
func (d *device) readRaw(n int, off uint64) []byte {
	if d.dead {
		return nil
	}
	p := make([]byte, n)
	d.mustRead(p, int64(off))
	return p
}

// fillGarbage fills the whole store with pseudo-random bytes from seed.
func fillGarbage(s store, size int64, seed uint64) {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	rng := rand.NewChaCha8(key)
	buf := make([]byte, 64<<10)
	for off := int64(0); off < size; off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), size-off)]
		rng.Read(p)
		if _, err := s.WriteAt(p, off); err != nil {
			panic(err)
		}
	}
}

// Sector contents. Every sector the model writes is self-describing: id
// (the write's number; 0 is all zeroes) and the array sector in the first
// 16 bytes, the rest a stream derived from both. A copy misplaced on the
// wrong sector, a stale copy and garbage are all told apart from the
// expected data.

func fillSector(p []byte, id, s uint64) {
	if id == 0 {
		clear(p[:512])
		return
	}
	binary.LittleEndian.PutUint64(p[0:], id)
	binary.LittleEndian.PutUint64(p[8:], s)
	x := id*0x9e3779b97f4a7c15 ^ s
	for i := 16; i < 512; i += 8 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(p[i:], z^z>>31)
	}
}

// sectorID decodes a sector read from array sector s: the id of the write
// that wrote it, or false for anything else (garbage, another sector's
// data, a torn sector).
func sectorID(p []byte, s uint64) (uint64, bool) {
	p = p[:512]
	id := binary.LittleEndian.Uint64(p)
	if id == 0 {
		for _, b := range p {
			if b != 0 {
				return 0, false
			}
		}
		return 0, true
	}
	if binary.LittleEndian.Uint64(p[8:]) != s {
		return 0, false
	}
	var want [512]byte
	fillSector(want[:], id, s)
	return id, bytes.Equal(p, want[:])
}

// describe names a sector's contents for messages.
func describe(p []byte, s uint64) string {
	if id, ok := sectorID(p, s); ok {
		return fmt.Sprintf("write %d", id)
	}
	if id := binary.LittleEndian.Uint64(p); id != 0 && id < 1<<32 {
		return fmt.Sprintf("not sector %d's data (header: write %d, sector %d)", s, id, binary.LittleEndian.Uint64(p[8:]))
	}
	return "garbage"
}
