package engine

import (
	"bytes"
	"testing"
	"time"
)

// An operation whose device left its role while it ran (the role was
// given to a new device: replace, a spare, re-add) says nothing of the
// role's new device: its error or its timeout must not fail the member
// being rebuilt there (md ties each bio to its rdev). The most common
// reason to replace a member is that it hangs or fails, so its
// operations still out then do exactly that.
func TestDepartedOperationBlamesNoMember(t *testing.T) {
	g := Geometry{Level: Level1, Members: 3, ChunkSectors: 128, MemberSectors: 1024}
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	be := &memBackend{done: map[uint16]error{}}
	for range 3 {
		be.members = append(be.members, &memMember{data: bytes.Repeat([]byte{'x'}, 1024<<9), badRead: map[uint64]bool{}})
	}
	var now time.Duration
	e := NewExecutor(arr, be, 4, 64<<10)
	be.exec = e
	e.Now = func() time.Duration { return now }
	e.MemberTimeout = 10 * time.Second
	e.bal.Inflight[1] = 1 << 30 // reads go to member 0
	e.bal.Inflight[2] = 1 << 30

	// Reads and writes out on member 0's device when it is replaced.
	e.Start(0, ReqWrite, 0, 8, false, bytes.Repeat([]byte{'a'}, 4096))
	e.Start(1, ReqWrite, 8, 8, false, bytes.Repeat([]byte{'b'}, 4096))
	rbuf := make([]byte, 4096)
	e.Start(2, ReqRead, 16, 8, false, rbuf)
	var old []memOp
	for _, o := range be.pending {
		if o.io.Member == 0 {
			old = append(old, o)
		} else {
			e.Done(o.tag, o.op, be.run(o))
		}
	}
	be.pending = nil
	if len(old) != 3 {
		t.Fatalf("operations on member 0: %+v", old)
	}
	arr.Fail(0)
	arr.Update(func(ms []MemberStatus) { ms[0] = MemberStatus{State: MemberRebuilding} })
	be.departed = 1 << 0
	persisted := func() {
		for _, st := range be.persists {
			e.Persisted(st.Gen)
		}
	}
	persisted()

	// A write's error from the old device.
	e.Done(old[0].tag, old[0].op, -5)
	if s := arr.State().Members[0].State; s != MemberRebuilding {
		t.Fatalf("an error of the replaced device failed the role's new one: %v", s)
	}
	persisted()
	if err, ok := be.done[0]; !ok || err != nil {
		t.Fatalf("write 0 (on two copies): done %v, err %v", ok, err)
	}
	// A read's error: retried on another copy.
	e.Done(old[2].tag, old[2].op, -5)
	if s := arr.State().Members[0].State; s != MemberRebuilding {
		t.Fatalf("a read error of the replaced device failed the role's new one: %v", s)
	}
	if len(be.pending) != 1 || be.pending[0].io.Member == 0 {
		t.Fatalf("the read was not retried on another copy: %+v", be.pending)
	}
	o := be.pending[0]
	be.pending = nil
	e.Done(o.tag, o.op, be.run(o))
	if err, ok := be.done[2]; !ok || err != nil || !bytes.Equal(be.buf(2, rbuf), bytes.Repeat([]byte{'x'}, 4096)) {
		t.Fatalf("read: done %v, err %v", ok, err)
	}
	// A write past the timeout on the old device.
	now = 11 * time.Second
	e.Tick()
	if s := arr.State().Members[0].State; s != MemberRebuilding {
		t.Fatalf("a timeout on the replaced device failed the role's new one: %v", s)
	}
	if len(be.abandoned) != 1 {
		t.Fatalf("given up: %+v", be.abandoned)
	}
	persisted()
	if err, ok := be.done[1]; !ok || err != nil {
		t.Fatalf("write 1 (on two copies): done %v, err %v", ok, err)
	}
}

// A write that reached only the departed device reached no copy.
func TestDepartedWriteCountsForNoCopy(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 128, MemberSectors: 1024}
	arr, err := NewArray(g)
	if err != nil {
		t.Fatal(err)
	}
	be := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be.members = append(be.members, &memMember{data: make([]byte, 1024<<9), badRead: map[uint64]bool{}})
	}
	e := NewExecutor(arr, be, 4, 64<<10)
	be.exec = e
	arr.Fail(1)
	for _, st := range be.persists {
		e.Persisted(st.Gen)
	}
	e.Persisted(arr.State().Gen)
	e.Start(0, ReqWrite, 0, 8, false, bytes.Repeat([]byte{'a'}, 4096))
	if len(be.pending) != 1 || be.pending[0].io.Member != 0 {
		t.Fatalf("planned %+v", be.pending)
	}
	o := be.pending[0]
	be.pending = nil
	// Role 0's device is removed while the write is out; it succeeds there.
	be.departed = 1 << 0
	e.Done(o.tag, o.op, be.run(o))
	for _, st := range be.persists {
		e.Persisted(st.Gen)
	}
	if err, ok := be.done[0]; !ok || err == nil {
		t.Fatalf("a write that reached only a device no longer in the array: done %v, err %v (want an error)", ok, err)
	}
}
