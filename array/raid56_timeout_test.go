package array

import (
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// A raid5 read given up on the last copy fails its request; the next
// request of its tag must not Rebuffer (no spare is reserved: panic).
func TestParityReadGivenUpOnLastCopyThenNextRequest(t *testing.T) {
	paths := memberFiles(t, 3, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level5, ParityLayout: engine.LeftSymmetric, ChunkSectors: 16, AssumeClean: true, NoBitmap: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	g := *a.Engine.Parity
	_, _, mem, _ := g.LocateData(0)
	if err := a.Fail((mem + 1) % 3); err != nil {
		t.Fatal(err)
	}
	a.MemberTimeout = 10 * time.Second
	r := newBufRing()
	h := a.newQueue(r)
	const tag = 1
	h.Handle(&ublk.Request{Tag: tag, Op: ublk.IOOpRead, Sector: 0, Sectors: 8, Buf: r.Buffer(tag)})
	if len(r.pending) != 1 || int(r.pending[0].io.Member) != mem {
		t.Fatalf("read planned as %+v", r.pending)
	}
	hung := r.pending[0]
	r.pending = nil
	r.now = r.now.Add(11 * time.Second)
	h.OnTick()
	if err, ok := r.done[tag]; !ok || err == nil {
		t.Fatalf("read given up on the last copy: done %v, %v", ok, err)
	}
	h.OnCompletion(hung.ud, 4096)
	clear(r.done)
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("next request of the tag: %v", p)
		}
	}()
	h.Handle(&ublk.Request{Tag: tag, Op: ublk.IOOpRead, Sector: 0, Sectors: 8, Buf: r.Buffer(tag)})
}
