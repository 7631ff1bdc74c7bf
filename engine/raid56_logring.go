package engine

import "fmt"

// ParityLogRing hands out space for one queue's write-hole log entries
// in its ring of the members' log areas (the same bytes on each member:
// an entry goes to its stripe's parity members). Entries are taken in
// the order of their sequence numbers, each in one piece (none wraps
// round the ring's end), and come back in that order once dead: below
// the array's durable checkpoint (ParityLogHeader). One queue thread
// uses it; no allocation.
type ParityLogRing struct {
	start, size uint64 // the ring: [start, start+size) of the log area, 4 KiB aligned
	head, tail  uint64 // bytes taken, freed, since the start (head-tail <= size)
	// live: the entries not yet freed, oldest first, in a fixed ring of
	// records (cap = the most entries the ring can hold at once).
	live     []ringEntry
	first, n int
}

type ringEntry struct {
	seq        uint64
	begin, end uint64 // head positions: [begin, end) counts the entry and any bytes skipped before it
}

// NewParityLogRing is the ring [start, start+size) of a log area (both
// multiples of 4096, size at least one header), for entries of at most
// maxEntry bytes.
func NewParityLogRing(start, size uint64, maxEntry int) (*ParityLogRing, error) {
	if start%4096 != 0 || size%4096 != 0 || size < ParityLogHeaderSize {
		return nil, fmt.Errorf("write-hole log ring at %d, %d bytes: not whole pages", start, size)
	}
	if uint64(maxEntry) > size {
		return nil, fmt.Errorf("write-hole log ring of %d bytes cannot hold an entry of %d", size, maxEntry)
	}
	return &ParityLogRing{start: start, size: size, live: make([]ringEntry, size/4096)}, nil
}

// Take reserves n bytes (rounded up to 4 KiB) for the entry numbered
// seq (greater than every number taken before) and returns their offset
// in the log area; ok false when the ring has no room until older
// entries are freed (Free).
func (r *ParityLogRing) Take(seq uint64, n int) (off uint64, ok bool) {
	need := roundUp(uint64(n), 4096)
	if need == 0 || need > r.size {
		return 0, false
	}
	if r.n == 0 {
		// Empty: start again at the ring's beginning (an entry of the
		// whole ring fits).
		r.head = (r.head + r.size - 1) / r.size * r.size // (size: any number of pages)
		r.tail = r.head
	}
	pos := r.head % r.size
	skip := uint64(0)
	if pos+need > r.size {
		skip = r.size - pos // to the ring's end: the entry starts at its beginning
	}
	if r.head+skip+need-r.tail > r.size || r.n == len(r.live) {
		return 0, false
	}
	begin := r.head
	r.head += skip + need
	r.live[(r.first+r.n)%len(r.live)] = ringEntry{seq: seq, begin: begin, end: r.head}
	r.n++
	return r.start + (r.head-need)%r.size, true
}

// Free frees, oldest first, every entry numbered below checkpoint.
func (r *ParityLogRing) Free(checkpoint uint64) {
	for r.n > 0 {
		e := r.live[r.first]
		if e.seq >= checkpoint {
			return
		}
		r.tail = e.end
		r.first = (r.first + 1) % len(r.live)
		r.n--
	}
}

// Oldest is the number of the oldest entry not freed (ok false: none).
func (r *ParityLogRing) Oldest() (seq uint64, ok bool) {
	if r.n == 0 {
		return 0, false
	}
	return r.live[r.first].seq, true
}

// Size is the ring's size in bytes.
func (r *ParityLogRing) Size() uint64 { return r.size }

// Taken is the number of bytes taken since the ring was made (skips at
// its end included).
func (r *ParityLogRing) Taken() uint64 { return r.head }

// Used is the number of bytes taken and not freed.
func (r *ParityLogRing) Used() uint64 { return r.head - r.tail }

// TakeAll reserves the entries of one write at once, numbered seq0,
// seq0+1, ... in order, of sizes[i] bytes each, their offsets in the log
// area going to offs[i]; all or none (ok false: the ring has no room for
// all of them until older entries are freed). A write that held some of
// its entries while waiting for the rest could wait for itself.
func (r *ParityLogRing) TakeAll(seq0 uint64, sizes []int, offs []uint64) bool {
	head, tail, n := r.head, r.tail, r.n
	for i, sz := range sizes {
		off, ok := r.Take(seq0+uint64(i), sz)
		if !ok {
			r.head, r.tail, r.n = head, tail, n
			return false
		}
		offs[i] = off
	}
	return true
}

// Fits reports whether entries of sizes could ever be taken at once:
// they fit the empty ring.
func (r *ParityLogRing) Fits(sizes []int) bool {
	var total uint64
	for _, sz := range sizes {
		total += roundUp(uint64(sz), 4096)
	}
	return total <= r.size && len(sizes) <= len(r.live)
}
