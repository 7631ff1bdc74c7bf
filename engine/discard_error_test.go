package engine

import (
	"errors"
	"testing"
)

// Found by review (ops): a discard error other than a refusal (EIO)
// failed its member, so an fstrim could leave a mirror degraded and
// rebuilding the whole member; md's raid1/raid10 ignore discard errors.
// It fails no member now. Where another copy took the discard the range
// is resynced (the copies may differ); where none did the request fails
// with EIO, the member kept, and a raid0 is not broken by it.
func TestDiscardErrorFailsNoMember(t *testing.T) {
	const eio = -5
	arr, be, e := newTrustExec(t)
	var unsynced [][2]uint64
	e.Unsynced = func(sector uint64, sectors uint32) { unsynced = append(unsynced, [2]uint64{sector, uint64(sectors)}) }
	e.Start(0, ReqDiscard, 8, 8, false, nil)
	deliverWith(be, e, func(o memOp) (int32, bool) { return eio, o.io.Member == 1 })
	if err, done := be.done[0]; !done || err != nil {
		t.Fatalf("discard failed by one member of two: done %v err %v", done, err)
	}
	if len(unsynced) != 1 || unsynced[0] != [2]uint64{8, 8} {
		t.Fatalf("discard failed by one member of two: ranges marked unsynced %v, want [[8 8]]", unsynced)
	}
	delete(be.done, 0)
	e.Start(0, ReqDiscard, 16, 8, false, nil)
	deliverWith(be, e, func(o memOp) (int32, bool) { return eio, true })
	if err, done := be.done[0]; !done || !errors.Is(err, ErrNoCopy) {
		t.Fatalf("discard failed by every member: done %v err %v, want an EIO error", done, err)
	}
	for i, m := range arr.State().Members {
		if m.State != MemberActive {
			t.Fatalf("a discard error failed member %d: %+v", i, m)
		}
	}
	if len(be.persists) != 0 {
		t.Fatalf("discard errors asked for persists: %v", be.persists)
	}

	g := Geometry{Level: Level0, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr0, _ := NewArray(g)
	be0 := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be0.members = append(be0.members, &memMember{data: make([]byte, 64<<9), badRead: map[uint64]bool{}})
	}
	e0 := NewExecutor(arr0, be0, 1, 4096)
	e0.Start(0, ReqDiscard, 0, 16, false, nil)
	deliverWith(be0, e0, func(o memOp) (int32, bool) { return eio, o.io.Member == 1 })
	if err, done := be0.done[0]; !done || !errors.Is(err, ErrNoCopy) {
		t.Fatalf("raid0 discard failed by a member: done %v err %v, want an EIO error", done, err)
	}
	if arr0.Broken() {
		t.Fatal("a discard error broke the raid0")
	}
}
