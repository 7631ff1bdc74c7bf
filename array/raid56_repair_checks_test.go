package array

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A member whose reads of some rows fail every time while its writes
// succeed (a sector the drive cannot remap, a path that drops reads): md
// re-reads the rewritten sector (R5_ReWrite, then "read error NOT
// corrected!!": md_error). So does the repair: the member is failed, not
// "repaired" forever while the array reports redundancy it does not have
// on those rows. (Found by review: the rewrite was counted as done.)
func TestParityReadRepairVerifiesRewrite(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	memberRW = func(d Device, p []byte, off int64, write bool) error {
		if f := devFault.Load(); f != nil && d == f.dev && p != nil && !write && off < f.hi && off+int64(len(p)) > f.lo {
			return errors.New("EIO")
		}
		return deviceRW(d, p, off, write)
	}
	t.Cleanup(func() { memberRW = deviceRW; devFault.Store(nil) })
	const span = 1024
	a, h, r, ref, _ := writtenParityArray(t, rng, engine.Level5, 4, 10, span)
	g := *a.Engine.Parity
	_, _, mem, msec := g.LocateData(40)
	failed := 0
	r.failOn = func(io engine.MemberIO) bool {
		bad := io.Kind == engine.IORead && int(io.Member) == mem && io.Sector < msec+8 && io.Sector+uint64(io.Sectors) > msec
		if bad {
			failed++
		}
		return bad
	}
	// The device's own reads of those rows fail too (the repair worker's
	// memberIO), its writes succeed.
	devFault.Store(&readFault{dev: a.Members[mem].Device, lo: int64(a.dataOffset + msec<<9), hi: int64(a.dataOffset + (msec+8)<<9)})
	const rounds = 20
	for i := range rounds {
		before := a.ReadRepairs()
		buf := pageBuf(8 << 9)
		delete(r.done, 0)
		h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpRead, Sector: 40, Sectors: 8, Buf: buf})
		pServe(t, rng, h, r, []uint16{0})
		if err := r.done[0]; err != nil || !bytes.Equal(buf, ref[40<<9:48<<9]) {
			t.Fatalf("round %d: %v", i, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for a.ReadRepairs() == before && a.Engine.State().Members[mem].State == engine.MemberActive {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no repair", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if s := a.Engine.State().Members[mem].State; s == engine.MemberActive {
		t.Fatalf("member %d failed %d reads of the same rows, each \"repaired\" (ReadRepairs %d), and is still %v: no re-read of the rewrite, no read error budget",
			mem, failed, a.ReadRepairs(), s)
	}
}

type readFault struct {
	dev    Device
	lo, hi int64
}

var devFault atomic.Pointer[readFault]

// The repair worker cuts a bad range into pieces: whole pages, so that
// on members with 4 KiB logical blocks (4Kn drives, files on a 4 KiB-
// sector filesystem) no O_DIRECT read or write of a piece is misaligned
// (EINVAL: the range would never be repaired), also with 3 or 5 members
// (len(buf)/Members bytes is not a multiple of 4096 then). The member
// I/O checks the alignment Device promises (4096: the members'
// LogicalBlock here).
func TestParityRepairPiecesAligned(t *testing.T) {
	for _, members := range []int{3, 5} {
		t.Run(fmt.Sprint(members), func(t *testing.T) {
			rng := rand.New(rand.NewSource(1))
			paths := memberFiles(t, members, 16<<20)
			spec := CreateSpec{Level: engine.Level5, ChunkSectors: 1024, RegionSectors: 4096}
			var mu sync.Mutex
			var bad []string
			nbad := func() int { mu.Lock(); defer mu.Unlock(); return len(bad) }
			memberRW = func(d Device, p []byte, off int64, write bool) error {
				lb := int64(d.Props().LogicalBlock)
				if p != nil && (off%lb != 0 || int64(len(p))%lb != 0 || int64(uintptr(unsafe.Pointer(unsafe.SliceData(p))))%lb != 0) {
					mu.Lock()
					defer mu.Unlock()
					bad = append(bad, fmt.Sprintf("write %v off %d len %d addr %%%d=%d", write, off, len(p), lb, uintptr(unsafe.Pointer(unsafe.SliceData(p)))%uintptr(lb)))
					return errors.New("EINVAL (misaligned O_DIRECT)")
				}
				if f := devFault.Load(); f != nil && d == f.dev && p != nil && off < f.hi && off+int64(len(p)) > f.lo {
					if write {
						devFault.Store(nil) // cured by the rewrite
					} else {
						return errors.New("EIO") // the bad chunk: the repair rewrites it
					}
				}
				return deviceRW(d, p, off, write)
			}
			t.Cleanup(func() { memberRW = deviceRW; devFault.Store(nil) })
			a, err := Open(paths, spec, true)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { a.Close() }()
			if a.Members[0].LogicalBlock != 4096 {
				t.Skipf("members have %d-byte logical blocks", a.Members[0].LogicalBlock)
			}
			if err := a.SetClean(false); err != nil {
				t.Fatal(err)
			}
			g := *a.Engine.Parity
			r := &pRing{done: map[uint16]error{}}
			h := a.newQueue(r)
			span := g.ChunkSectors * uint64(g.DataMembers())
			ref := make([]byte, g.ArraySectors()<<9)
			var id uint64
			for range 4 {
				pBatch(t, rng, h, r, ref, span, &id)
			}
			a.WaitSync()
			// A 512 KiB read of one whole chunk failed on its member
			// (as a queue with the default 512 KiB requests reports it).
			_, _, mem, msec := g.LocateData(0)
			devFault.Store(&readFault{dev: a.Members[mem].Device, lo: int64(a.dataOffset + msec<<9), hi: int64(a.dataOffset + (msec+g.ChunkSectors)<<9)})
			a.requestRepair(msec, uint32(g.ChunkSectors), 1<<uint(mem))
			deadline := time.Now().Add(10 * time.Second)
			for a.ReadRepairs() == 0 && nbad() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("no repair, no misaligned I/O")
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if len(bad) > 0 {
				t.Fatalf("%d members: misaligned repair I/O: %v (repairs %d)", members, bad[:min(3, len(bad))], a.ReadRepairs())
			}
		})
	}
}
