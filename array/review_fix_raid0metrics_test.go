package array

import (
	"math/rand"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
	"github.com/ublk-raid/ublk-raid/ublk"
)

// Found by review (fix, f850de0): a raid0 member's failed write now breaks
// the array in memory (detail: state "broken", every later write and
// flush fails) instead of failing the member. The Prometheus snapshot was
// not taught the new state: it still reports the array active, every
// member active and nothing degraded, exactly as a healthy array, so the
// shipped alerts (array degraded, member failed) that fired for this
// before no longer fire while every write to the array fails.
func TestReviewFixRaid0BrokenMetricsLookHealthy(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	paths := memberFiles(t, 2, 16<<20)
	a, err := Open(paths, CreateSpec{Level: engine.Level0, ChunkSectors: 16}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.SetClean(false); err != nil {
		t.Fatal(err)
	}
	r := &pRing{done: map[uint16]error{}, failOn: func(io engine.MemberIO) bool {
		return io.Member == 1 && io.Kind == engine.IOWrite
	}}
	h := a.newQueue(r)
	defer h.Close()
	h.Handle(&ublk.Request{Tag: 0, Op: ublk.IOOpWrite, Sector: 16, Sectors: 16, Buf: pageBuf(16 << 9)})
	pServe(t, rng, h, r, []uint16{0})
	if r.done[0] == nil {
		t.Fatal("the write to the failing member succeeded")
	}
	if s := a.Status().State; s != "broken" {
		t.Fatalf("detail state %q, want broken", s)
	}
	m := a.Metrics("ublkb0")
	failed := m.FailedSlots
	for _, ms := range m.Members {
		if ms.State != metrics.MemberActive {
			failed++
		}
	}
	if m.State == metrics.ArrayActive && failed == 0 {
		t.Fatalf("metrics of a raid0 broken by a failed write (detail: broken, every write fails): state %v, %d members all active, none failed: indistinguishable from a healthy array (UblkRaidArrayDegraded and UblkRaidMemberFailed stay silent)", m.State, len(m.Members))
	}
}
