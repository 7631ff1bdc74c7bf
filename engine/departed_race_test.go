package engine

import (
	"bytes"
	"testing"
)

// raceBackend is memBackend whose Departed, at its call number at, first
// lets a replace of member 0 happen (the role failed, then given to a new
// device being rebuilt) and answers as the caller's look at the device
// did just before: not departed. Later calls see the new device.
type raceBackend struct {
	*memBackend
	arr      *Array
	calls    int
	at       int
	replaced bool
}

func (b *raceBackend) Departed(tag uint16, op OpID, io MemberIO) bool {
	b.calls++
	if io.Member != 0 {
		return false
	}
	if b.calls == b.at {
		b.arr.Fail(0)
		b.arr.Update(func(ms []MemberStatus) { ms[0] = MemberStatus{State: MemberRebuilding} })
		b.replaced = true
		return false
	}
	return b.replaced
}

// A member replaced between the executor's look at an operation's device
// and its failure of the role: the new device (being rebuilt) is not
// failed for the old one's error. Whichever look the replace follows (the
// first, in Done, or the one under the failure itself), the failure is
// made only while the role's state is the one seen with the device
// (FailRedundantIf); without that, the role's new device was failed.
func TestFailureRacingReplaceSparesNewDevice(t *testing.T) {
	for at := 1; at <= 2; at++ {
		g := Geometry{Level: Level1, Members: 3, ChunkSectors: 128, MemberSectors: 1024}
		arr, err := NewArray(g)
		if err != nil {
			t.Fatal(err)
		}
		mb := &memBackend{done: map[uint16]error{}}
		for range 3 {
			mb.members = append(mb.members, &memMember{data: bytes.Repeat([]byte{'x'}, 1024<<9), badRead: map[uint64]bool{}})
		}
		be := &raceBackend{memBackend: mb, arr: arr, at: at}
		e := NewExecutor(arr, be, 4, 64<<10)
		mb.exec = e
		e.Start(0, ReqWrite, 0, 8, false, bytes.Repeat([]byte{'a'}, 4096))
		for _, o := range mb.pending {
			res := mb.run(o)
			if o.io.Member == 0 {
				res = -5 // the old device fails the write
			}
			e.Done(o.tag, o.op, res)
		}
		mb.pending = nil
		for _, st := range mb.persists {
			e.Persisted(st.Gen)
		}
		if !be.replaced {
			t.Fatalf("at %d: the replace never happened (%d Departed calls)", at, be.calls)
		}
		if s := arr.State().Members[0].State; s != MemberRebuilding {
			t.Fatalf("replace after look %d: the role's new device is %v, want rebuilding", at, s)
		}
		if err, ok := mb.done[0]; !ok || err != nil {
			t.Fatalf("replace after look %d: the write (two copies took it): done %v, %v", at, ok, err)
		}
	}
}
