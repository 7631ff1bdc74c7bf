package engine

import (
	"bytes"
	"testing"
	"time"
)

// A write whose op on role 0 is out on a device that left the role while
// role 0's failure is not durable yet (failed in memory by a read timeout,
// then replaced before any superblock recorded it): the write, which then
// reached role 1 only, must be acknowledged only once the failure is
// durable, as when the op is blamed (memberFailed sets needGen). Else a
// crash before the record brings the old device back in sync without the
// write, and a resync of the dirty region (from the lowest member) can
// copy the old data over it.
func TestDepartedWriteWaitsForDurableDrop(t *testing.T) {
	for _, how := range []string{"error", "timeout"} {
		t.Run(how, func(t *testing.T) {
			g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1024}
			arr, err := NewArray(g)
			if err != nil {
				t.Fatal(err)
			}
			be := &memBackend{done: map[uint16]error{}}
			for range 2 {
				be.members = append(be.members, &memMember{data: make([]byte, 1024<<9), badRead: map[uint64]bool{}})
			}
			var now time.Duration
			e := NewExecutor(arr, be, 4, 64<<10)
			be.exec = e
			e.Now = func() time.Duration { return now }
			e.MemberTimeout = 10 * time.Second
			e.Start(0, ReqWrite, 0, 8, false, bytes.Repeat([]byte{'a'}, 4096))
			var old memOp
			for _, o := range be.pending {
				if o.io.Member == 0 {
					old = o
				} else {
					e.Done(o.tag, o.op, be.run(o))
				}
			}
			be.pending = nil
			// Role 0 failed in memory only (a read timeout does not
			// persist), then given a new device.
			arr.FailRedundant(0)
			arr.Update(func(ms []MemberStatus) { ms[0] = MemberStatus{State: MemberRebuilding} })
			be.departed = 1 << 0
			if how == "error" {
				e.Done(old.tag, old.op, -5)
			} else {
				now = 11 * time.Second
				e.Tick()
			}
			if _, ok := be.done[0]; ok {
				t.Fatal("write acknowledged on role 1 alone before role 0's failure is durable")
			}
			for _, st := range be.persists {
				e.Persisted(st.Gen)
			}
			if err, ok := be.done[0]; !ok || err != nil {
				t.Fatalf("after the persist: done %v, err %v", ok, err)
			}
		})
	}
}
