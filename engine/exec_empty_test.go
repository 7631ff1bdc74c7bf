package engine

import "testing"

// Found by review. Every request started is completed, an empty read or write included
// (the parity executor completes one at once): a request that plans no
// member operation has nothing to wait for.
func TestExecutorEmptyRequestCompletes(t *testing.T) {
	g := Geometry{Level: Level1, Members: 2, ChunkSectors: 8, MemberSectors: 64}
	arr, _ := NewArray(g)
	be := &memBackend{done: map[uint16]error{}}
	for range 2 {
		be.members = append(be.members, &memMember{data: make([]byte, 64<<9), badRead: map[uint64]bool{}})
	}
	e := NewExecutor(arr, be, 2, 4096)
	e.Start(0, ReqRead, 0, 0, false, make([]byte, 4096))
	e.Start(1, ReqWrite, 0, 0, false, make([]byte, 4096))
	be.runAll(e)
	for tag, op := range []string{"read", "write"} {
		if _, ok := be.done[uint16(tag)]; !ok {
			t.Errorf("empty %s (tag %d) never completed", op, tag)
		}
	}
}
