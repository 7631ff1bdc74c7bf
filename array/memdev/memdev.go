package memdev

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ublk-raid/ublk-raid/ublk"
)

// SectorSize is the granularity of the cache, of tearing and of faults.
const SectorSize = 512

// ErrKilled is what a device of an ended process answers.
var ErrKilled = errors.New("memdev: the process that opened the device has ended")

// Op is a kind of device operation, for faults.
type Op uint8

const (
	OpRead Op = 1 << iota
	OpWrite
	OpFlush
	OpDiscard
	OpWriteZeroes
)

// Fault makes operations of the kinds in Ops that touch [Off, Off+Len)
// (bytes; Len 0: the whole disk) fail with Err.
type Fault struct {
	Ops      Op
	Off, Len int64
	Err      error
}

// Rack is a set of disks and the process that has them open.
type Rack struct {
	mu    sync.Mutex
	rng   *rand.Rand
	disks map[string]*Disk
	proc  *process
	// cutIn > 0: the power is cut during the cutIn'th write from now.
	cutIn int
	// Ops counts the operations the devices served (liveness checks).
	ops uint64
}

type process struct {
	dead chan struct{}
}

// NewRack returns an empty rack whose power cuts draw from rng.
func NewRack(rng *rand.Rand) *Rack {
	return &Rack{rng: rng, disks: map[string]*Disk{}, proc: &process{dead: make(chan struct{})}}
}

// Disk is one in-memory disk.
type Disk struct {
	props ublk.MemberProps
	// stable: the stable contents, by page of pageSize bytes; a page not
	// there holds its leftovers (zeroes where none), so a large disk
	// costs only what was written to it.
	stable    map[int64][]byte
	leftovers []leftover
	cache     map[int64][]byte // sector -> its newest unflushed data
	faults    []Fault
	hang      chan struct{} // non-nil: operations wait for it to close
	open      bool          // open by the current process
}

// AddDisk adds a disk of size bytes (a multiple of 4096) at path.
func (r *Rack) AddDisk(path string, size int64) *Disk {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := &Disk{props: ublk.MemberProps{Path: path, Size: size, BlockDevice: true, LogicalBlock: 512,
		PhysicalBlock: 4096, VolatileCache: true, Discard: true, WriteZeroes: true, DiscardGranularity: 4096},
		stable: map[int64][]byte{}, cache: map[int64][]byte{}}
	r.disks[path] = d
	return d
}

// pageSize is the unit of the sparse stable contents.
const pageSize = 4096

// leftover: what the disk holds from byte from on where nothing was
// written (fill writes the bytes at off into p).
type leftover struct {
	from int64
	fill func(off int64, p []byte)
}

// Grow grows the disk in place to size bytes (a multiple of 4096, as an
// lvextend or a resized virtual disk): the added space holds what fill
// writes (nil: zeroes). Open devices see the new size (CurrentSize, and
// their bounds).
func (r *Rack) Grow(d *Disk, size int64, fill func(off int64, p []byte)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if size%pageSize != 0 || size < d.props.Size {
		panic(fmt.Sprintf("memdev: grow %s from %d to %d bytes", d.props.Path, d.props.Size, size))
	}
	if fill != nil {
		d.leftovers = append(d.leftovers, leftover{from: d.props.Size, fill: fill})
	}
	d.props.Size = size
}

// readStable copies the stable contents at off into p.
func (d *Disk) readStable(p []byte, off int64) {
	for len(p) > 0 {
		pg, po := off/pageSize, off%pageSize
		n := min(int64(len(p)), pageSize-po)
		if b := d.stable[pg]; b != nil {
			copy(p[:n], b[po:po+n])
		} else {
			d.leftover(p[:n], off)
		}
		p, off = p[n:], off+n
	}
}

// leftover writes into p what the disk holds at off where nothing was
// written (within one page).
func (d *Disk) leftover(p []byte, off int64) {
	for i := len(d.leftovers) - 1; i >= 0; i-- {
		if l := d.leftovers[i]; l.from <= off {
			l.fill(off, p)
			return
		}
	}
	clear(p)
}

// writeStable puts p at off into the stable contents.
func (d *Disk) writeStable(p []byte, off int64) {
	for len(p) > 0 {
		pg, po := off/pageSize, off%pageSize
		n := min(int64(len(p)), pageSize-po)
		b := d.stable[pg]
		if b == nil {
			b = make([]byte, pageSize)
			d.leftover(b, pg*pageSize)
			d.stable[pg] = b
		}
		copy(b[po:po+n], p[:n])
		p, off = p[n:], off+n
	}
}

// Disk returns the disk at path (nil: none).
func (r *Rack) Disk(path string) *Disk {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.disks[path]
}

// Open opens the disk at path for the current process: array.OpenDevice.
// A disk is opened once at a time (as O_EXCL): a second open is EBUSY.
func (r *Rack) Open(path string) (*Dev, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.openLocked(r.proc, path)
}

// Opener returns Open for the current process only: once that process
// has ended (Kill, a power cut), its opens fail with ErrKilled, as a dead
// process opens nothing (the code of a process a power cut ended may
// still run in a test; the disks it opens must not take its writes).
func (r *Rack) Opener() func(path string) (*Dev, error) {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	return func(path string) (*Dev, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		select {
		case <-p.dead:
			return nil, ErrKilled
		default:
		}
		return r.openLocked(p, path)
	}
}

func (r *Rack) openLocked(p *process, path string) (*Dev, error) {
	d := r.disks[path]
	if d == nil {
		return nil, fmt.Errorf("member %s does not exist", path)
	}
	if d.open {
		return nil, fmt.Errorf("member %s is in use: %w", path, unix.EBUSY)
	}
	d.open = true
	return &Dev{r: r, d: d, p: p}, nil
}

// Kill ends the process (kill -9): its devices answer ErrKilled, what
// they hold in cache stays; a new process may open the disks.
func (r *Rack) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killLocked()
}

func (r *Rack) killLocked() {
	close(r.proc.dead)
	r.proc = &process{dead: make(chan struct{})}
	for _, d := range r.disks {
		d.open = false
	}
}

// PowerCut ends the process and drops each disk's cache but for a subset
// of its sectors drawn at random.
func (r *Rack) PowerCut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cutLocked()
}

func (r *Rack) cutLocked() {
	r.killLocked()
	r.cutIn = 0
	for _, p := range r.paths() {
		d := r.disks[p]
		secs := make([]int64, 0, len(d.cache))
		for s := range d.cache {
			secs = append(secs, s)
		}
		slices.Sort(secs)
		for _, s := range secs {
			if r.rng.IntN(2) == 0 {
				d.writeStable(d.cache[s], s*SectorSize)
			}
		}
		clear(d.cache)
	}
}

// CutAfter arms a power cut during the n'th write (n >= 1) any device
// of the rack serves from now: a random part of that write's sectors
// reaches the cache first. 0 disarms it.
func (r *Rack) CutAfter(n int) {
	r.mu.Lock()
	r.cutIn = n
	r.mu.Unlock()
}

// Armed reports whether a power cut armed by CutAfter is still to come.
func (r *Rack) Armed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cutIn > 0
}

// Ops is the number of operations the rack's devices served.
func (r *Rack) Ops() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ops
}

func (r *Rack) paths() []string {
	ps := make([]string, 0, len(r.disks))
	for p := range r.disks {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// SetFaults replaces the disk's faults.
func (r *Rack) SetFaults(d *Disk, fs ...Fault) {
	r.mu.Lock()
	d.faults = fs
	r.mu.Unlock()
}

// Hang makes the disk's operations wait until Release (or the process
// ends, when they are dropped).
func (r *Rack) Hang(d *Disk) {
	r.mu.Lock()
	if d.hang == nil {
		d.hang = make(chan struct{})
	}
	r.mu.Unlock()
}

// Release lets the disk's waiting operations go on, and later ones run.
func (r *Rack) Release(d *Disk) {
	r.mu.Lock()
	if d.hang != nil {
		close(d.hang)
		d.hang = nil
	}
	r.mu.Unlock()
}

// Unsupported makes the disk answer discard and write-zeroes with
// EOPNOTSUPP (and say so in its properties, for devices opened later).
func (r *Rack) Unsupported(d *Disk) {
	r.mu.Lock()
	d.props.Discard, d.props.WriteZeroes = false, false
	r.mu.Unlock()
}

// Stable returns a copy of n bytes at off of what the disk would hold
// after a power cut that kept no cached sector.
func (r *Rack) Stable(d *Disk, off int64, n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := make([]byte, n)
	d.readStable(p, off)
	return p
}

// Preload puts p at off into the disk's stable contents, as what the
// device held before the test (for example another disk's leftovers).
func (r *Rack) Preload(d *Disk, off int64, p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d.writeStable(p, off)
}

// Current returns a copy of n bytes at off as reads see them now.
func (r *Rack) Current(d *Disk, off int64, n int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := make([]byte, n)
	d.read(p, off)
	return p
}

// Size returns d's size in bytes.
func (r *Rack) Size(d *Disk) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return d.props.Size
}

func (d *Disk) read(p []byte, off int64) {
	d.readStable(p, off)
	for s := off / SectorSize; s < (off+int64(len(p)))/SectorSize; s++ {
		if c, ok := d.cache[s]; ok {
			copy(p[s*SectorSize-off:], c)
		}
	}
}

// write puts p at off into the cache (durable: into the stable contents,
// its sectors out of the cache); keep, if not nil, says which sectors
// are written at all (a torn write).
func (d *Disk) write(p []byte, off int64, durable bool, keep func() bool) {
	for i := int64(0); i < int64(len(p)); i += SectorSize {
		if keep != nil && !keep() {
			continue
		}
		s := (off + i) / SectorSize
		if durable {
			d.writeStable(p[i:i+SectorSize], off+i)
			delete(d.cache, s)
			continue
		}
		c := d.cache[s]
		if c == nil {
			c = make([]byte, SectorSize)
			d.cache[s] = c
		}
		copy(c, p[i:i+SectorSize])
	}
}

func (d *Disk) flush() {
	for s, c := range d.cache {
		d.writeStable(c, s*SectorSize)
	}
	clear(d.cache)
}

// Dev is a disk opened by a process: array.Device.
type Dev struct {
	r      *Rack
	d      *Disk
	p      *process
	closed bool
}

// Props implements array.Device.
func (v *Dev) Props() *ublk.MemberProps {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	p := v.d.props
	return &p
}

// CurrentSize is the disk's size now (array.currentSize: a disk grown in
// place since it was opened).
func (v *Dev) CurrentSize() (int64, error) {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	return v.d.props.Size, nil
}

// Fd implements array.Device: none.
func (v *Dev) Fd() int { return -1 }

// Close implements array.Device.
func (v *Dev) Close() error {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	if v.closed {
		return errors.New("memdev: closed twice")
	}
	v.closed = true
	if v.p == v.r.proc {
		v.d.open = false
	}
	return nil
}

// do runs f on the disk under the rack's lock once the disk does not
// hang, unless the process ended or a fault answers first. p is the data
// of a write (nil: zeroes), for a power cut in the middle of it.
func (v *Dev) do(op Op, off, n int64, p []byte, f func()) error {
	v.r.mu.Lock()
	for {
		select {
		case <-v.p.dead:
			v.r.mu.Unlock()
			return ErrKilled
		default:
		}
		h := v.d.hang
		if h == nil {
			break
		}
		v.r.mu.Unlock()
		select {
		case <-h:
		case <-v.p.dead:
		}
		v.r.mu.Lock()
	}
	defer v.r.mu.Unlock()
	if v.closed {
		return fmt.Errorf("memdev %s: closed", v.d.props.Path)
	}
	if off < 0 || n < 0 || off+n > v.d.props.Size || off%SectorSize != 0 || n%SectorSize != 0 {
		return fmt.Errorf("memdev %s: %d bytes at %d: %w", v.d.props.Path, n, off, unix.EINVAL)
	}
	if (op == OpDiscard && !v.d.props.Discard) || (op == OpWriteZeroes && !v.d.props.WriteZeroes) {
		return unix.EOPNOTSUPP
	}
	for _, ft := range v.d.faults {
		if ft.Ops&op != 0 && (ft.Len == 0 || (off < ft.Off+ft.Len && ft.Off < off+max(n, 1))) {
			return fmt.Errorf("memdev %s at %d: %w", v.d.props.Path, off, ft.Err)
		}
	}
	v.r.ops++
	if op != OpRead && v.r.cutIn > 0 {
		if v.r.cutIn--; v.r.cutIn == 0 {
			if op != OpFlush {
				// Torn: some of the write's sectors reach the cache.
				if p == nil {
					p = make([]byte, n)
				}
				v.d.write(p, off, false, func() bool { return v.r.rng.IntN(2) == 0 })
			}
			v.r.cutLocked()
			return ErrKilled
		}
	}
	f()
	return nil
}

// ReadAt implements array.Device.
func (v *Dev) ReadAt(p []byte, off int64) error {
	return v.do(OpRead, off, int64(len(p)), nil, func() { v.d.read(p, off) })
}

// WriteAt implements array.Device: into the cache.
func (v *Dev) WriteAt(p []byte, off int64) error {
	return v.do(OpWrite, off, int64(len(p)), p, func() { v.d.write(p, off, false, nil) })
}

// WriteAtDurable implements array.Device: a FUA write.
func (v *Dev) WriteAtDurable(p []byte, off int64) error {
	return v.do(OpWrite, off, int64(len(p)), p, func() { v.d.write(p, off, true, nil) })
}

// Flush implements array.Device.
func (v *Dev) Flush() error { return v.do(OpFlush, 0, 0, nil, v.d.flush) }

// Discard discards n bytes at off (they read as zeroes).
func (v *Dev) Discard(off, n int64) error {
	return v.do(OpDiscard, off, n, nil, func() { v.d.write(make([]byte, n), off, false, nil) })
}

// WriteZeroes writes n zero bytes at off.
func (v *Dev) WriteZeroes(off, n int64) error {
	return v.do(OpWriteZeroes, off, n, nil, func() { v.d.write(make([]byte, n), off, false, nil) })
}

// Path is the disk's path.
func (d *Disk) Path() string { return d.props.Path }
