package ublk

import "testing"

// Found by review: a WRITE_ZEROES with FUA must be durable when it
// completes. The member's zeroing (fallocate) has no FUA form, and the
// request was committed as soon as it returned: the zeroes could still be
// in the member's cache. Now a flush follows it before the commit; without
// FUA, none does.
func TestPassthroughWriteZeroesFUAFlushes(t *testing.T) {
	p := newPTHarness(t, testMember(1<<20))
	p.handle(IOOpWriteZeroes, IOFlagFUA, 8, 8)
	if s := p.last(); s.Opcode != OpFallocate {
		t.Fatalf("first SQE: op %d, want fallocate", s.Opcode)
	}
	p.h.OnCompletion(0, 0)
	if _, ok := p.committed(); ok {
		t.Fatal("a FUA write-zeroes committed before a flush of the member")
	}
	if s := p.last(); s.Opcode != OpFsync {
		t.Fatalf("after the zeroing: op %d, want fsync", s.Opcode)
	}
	p.h.OnCompletion(0, 0)
	if res, ok := p.committed(); !ok || res != 0 {
		t.Fatalf("committed %d (%v), want 0", res, ok)
	}

	p = newPTHarness(t, testMember(1<<20))
	p.handle(IOOpWriteZeroes, 0, 8, 8)
	p.h.OnCompletion(0, 0)
	if res, ok := p.committed(); !ok || res != 0 {
		t.Fatalf("without FUA: committed %d (%v), want 0 at once", res, ok)
	}
}
