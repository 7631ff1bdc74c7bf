package engine

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// Stripe buffers. A raid5/6 write needs memory of its own for what it
// pre-reads, the parity it computes and its write-hole log entries; a read
// that reconstructs a chunk needs it for the other chunks. A direct read
// needs none (it reads into the request's pages). What a request needs
// is known once it is planned (slabNeed), and is far below the worst case
// of a request of the largest size: a 4 KiB write takes a few pages, the
// worst 512 KiB one megabytes. So each queue keeps a pool (slabPool) of
// buffers in power-of-two sizes, bounded in bytes: a request takes one
// when it is planned and gives it back when it finishes; one that finds
// the pool at its bound waits (parity SlabWait, in order) until another
// gives one back. The bound holds two requests of the largest need, so a
// request always gets one once the others are done; the requests that
// hold buffers never wait for one that waits (they hold their stripes,
// and wait only for I/O, the log ring and persists). md bounds its stripe
// cache likewise (stripe_cache_size), where a preallocated worst case per
// tag would take (members+2) x rows x 512 bytes for each of every queue's
// tags: hundreds of MiB per array.

// strictSlabNeed makes alloc check each plan against its slabNeed, not
// only against its buffer, which is rounded up (tests).
var strictSlabNeed = false

// slabMinShift: the smallest stripe buffer is 16 KiB.
const slabMinShift = 14

// SlabBudgetMin is the least a queue's stripe buffers may add up to.
const SlabBudgetMin = 8 << 20

// slabPool is a queue's stripe buffers (queue thread only).
type slabPool struct {
	free   [][][]byte // by class: buffers of 1<<(slabMinShift+class) bytes
	bytes  int        // made and not dropped: held by requests, or free
	budget int
	wait   []uint16 // requests waiting for a buffer, oldest first
	// least: no buffer taken is smaller (tests: every request takes the
	// largest, so that few fit under the bound).
	least int
}

// slabClass is the class of the buffers that hold n bytes.
func slabClass(n int) int {
	if n <= 1<<slabMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - slabMinShift
}

func slabSize(class int) int { return 1 << (slabMinShift + class) }

// init sizes the pool for requests that need up to maxNeed bytes, with at
// least SlabBudgetMin and two of the largest, for depth requests.
func (p *slabPool) init(maxNeed, depth int) {
	top := slabClass(maxNeed)
	p.budget = max(SlabBudgetMin, 2*slabSize(top))
	p.free = make([][][]byte, top+1)
	for c := range p.free {
		// Room for every buffer the budget allows: putting one back
		// never allocates.
		p.free[c] = make([][]byte, 0, p.budget/slabSize(c)+1)
	}
	p.wait = make([]uint16, 0, depth)
}

// take returns a buffer of at least n bytes (at a page boundary, as the
// members take direct I/O), or nil when the pool is at its bound and no
// free buffer is large enough.
func (p *slabPool) take(n int) []byte {
	c := slabClass(max(n, p.least))
	if c >= len(p.free) {
		panic(fmt.Sprintf("engine: a stripe buffer of %d bytes, beyond the pool's largest", n))
	}
	if b := p.pop(c); b != nil {
		return b
	}
	size := slabSize(c)
	if p.bytes+size > p.budget {
		// A larger one free?
		for k := c + 1; k < len(p.free); k++ {
			if b := p.pop(k); b != nil {
				return b
			}
		}
		// Free smaller ones dropped to make room (a workload that
		// changed sizes), if that is enough.
		smaller := 0
		for k := range c {
			smaller += len(p.free[k]) * slabSize(k)
		}
		if p.bytes-smaller+size > p.budget {
			return nil
		}
		for k := c - 1; k >= 0 && p.bytes+size > p.budget; k-- {
			for p.bytes+size > p.budget {
				b := p.pop(k)
				if b == nil {
					break
				}
				p.bytes -= len(b)
			}
		}
		if p.bytes+size > p.budget {
			return nil
		}
	}
	p.bytes += size
	return AlignedBuf(size)
}

func (p *slabPool) pop(c int) []byte {
	l := p.free[c]
	if len(l) == 0 {
		return nil
	}
	b := l[len(l)-1]
	l[len(l)-1] = nil
	p.free[c] = l[:len(l)-1]
	return b
}

// put gives back buffer b, taken from the pool.
func (p *slabPool) put(b []byte) {
	c := slabClass(len(b))
	p.free[c] = append(p.free[c], b)
}

// lend takes buffer b out of the pool's count: an operation given up
// after the member timeout may still use it, for as long as it likes;
// the pool does not wait for it.
func (p *slabPool) lend(b []byte) { p.bytes -= len(b) }

// returned takes back buffer b, lent, now that nothing uses it: kept if
// the bound allows, else dropped.
func (p *slabPool) returned(b []byte) {
	if p.bytes+len(b) > p.budget {
		return
	}
	p.bytes += len(b)
	p.put(b)
}

// SerializeBuffers makes the queue's pool hold one buffer of the largest
// need, which every request that needs one takes: such requests are served
// one at a time, the others waiting (tests of the waits). Call it before
// the first request, after EnableLog.
func (e *ParityExecutor) SerializeBuffers() {
	e.slabs.budget = slabSize(len(e.slabs.free) - 1)
	e.slabs.least = e.slabs.budget
}

// AlignedBuf is n bytes at a page boundary, on the Go heap (the members
// take direct I/O).
func AlignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	o := int(4096-uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4096) % 4096
	return b[o : o+n : o+n]
}

// slabNeed is how many bytes of stripe buffer request r's plan takes:
// what prepare allocates for its segments, then logPrepare for their
// write-hole log entries (each page-aligned, with a payload of the rows
// for each parity at most). Keep it in step with both: alloc panics if a
// plan takes more.
func (e *ParityExecutor) slabNeed(r *parityReq) int {
	members := uint64(1)<<uint(e.geo.Members) - 1
	pc := e.par.Count()
	need := 0
	for i := range r.segs {
		s := &r.segs[i]
		n := int(s.hi-s.lo) << 9
		pbits := 1<<uint(s.m.P) | qbit(s.m.Q)
		if r.op == ReqRead {
			if s.missing != 0 {
				k := bits.OnesCount64(s.reads&^s.want) + bits.OnesCount64(members&^pbits&^s.reads)
				need += k * n
			}
			continue
		}
		k := bits.OnesCount64(s.reads) + bits.OnesCount64(s.missing)
		if s.mode != ParityDataOnly {
			pms := [2]int{s.m.P, s.m.Q}
			for _, pm := range pms[:pc] {
				if s.mode != ParityRMW || s.reads&(1<<uint(pm)) == 0 {
					k++
				}
			}
		}
		need += k * n
	}
	if e.logRing != nil && r.op == ReqWrite {
		for i := range r.segs {
			s := &r.segs[i]
			if s.writes&(1<<uint(s.m.P)|qbit(s.m.Q)) == 0 {
				continue
			}
			need = int(roundUp(uint64(need), ParityLogHeaderSize)) +
				int(roundUp(uint64(ParityLogEntrySize(s.hi-s.lo, pc)), ParityLogHeaderSize))
		}
	}
	return need
}

// takeSlab gives request tag a stripe buffer for its plan, keeping the one
// it holds if large enough; false: it waits for one (parked in the pool's
// queue, retried by RetryParked).
func (e *ParityExecutor) takeSlab(tag uint16) bool {
	r := &e.reqs[tag]
	need := e.slabNeed(r)
	r.need = need
	if need <= len(r.slab) {
		return true
	}
	e.putSlab(r)
	if len(e.slabs.wait) == 0 || e.slabRetry {
		if r.slab = e.slabs.take(need); r.slab != nil {
			return true
		}
	}
	r.phase = paritySlabWait
	if e.slabRetry && int(tag) == e.slabHead {
		// The head of the line, planned again with a larger need (the
		// state changed while it waited): first in line still.
		e.slabs.wait = append(e.slabs.wait, 0)
		copy(e.slabs.wait[1:], e.slabs.wait)
		e.slabs.wait[0] = tag
		return false
	}
	e.slabs.wait = append(e.slabs.wait, tag)
	e.Stats.BufferWaits.Add(1)
	return false
}

// putSlab gives back request r's stripe buffer, if it holds one, and gets
// the queue woken for a request that waits for one.
func (e *ParityExecutor) putSlab(r *parityReq) {
	if r.slab == nil {
		return
	}
	e.slabs.put(r.slab)
	r.slab = nil
	e.slabFreed()
}

// slabFreed gets the queue woken (RetryParked) when a request waits for a
// stripe buffer.
func (e *ParityExecutor) slabFreed() {
	if len(e.slabs.wait) > 0 && e.Wake != nil && !e.slabRetry {
		e.Wake()
	}
}

// retrySlabWait plans the requests waiting for a stripe buffer, oldest
// first, until one still finds none.
func (e *ParityExecutor) retrySlabWait() {
	if e.slabRetry {
		return
	}
	e.slabRetry = true
	for len(e.slabs.wait) > 0 {
		tag := e.slabs.wait[0]
		r := &e.reqs[tag]
		b := e.slabs.take(e.slabNeed(r))
		if b == nil {
			break
		}
		copy(e.slabs.wait, e.slabs.wait[1:])
		e.slabs.wait = e.slabs.wait[:len(e.slabs.wait)-1]
		r.slab = b
		r.phase = parityIdle
		e.slabHead = int(tag)
		e.plan(tag)
		e.slabHead = -1
	}
	e.slabRetry = false
}
