package resync

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// Found by review. A check of a raid1 whose member 0 fails one read of one 4 KiB block
// (a bad sector, cured by the rewrite): the copies also differ in another
// block of the same 1 MiB step, 250 KiB away, which both members read
// fine. md counts that block in mismatch_cnt and writes nothing to it
// (raid1 compares every mirror that read, 64 KiB at a time; only the
// range whose read failed is rewritten). Here the whole 1 MiB step of
// member 0 was left out of the comparison as soon as any part of its read
// failed, and then overwritten from member 1 (rewriteFailed with the whole
// step): the check counted no mismatch and silently replaced member 0's
// differing block.
func TestCheckReadErrorHidesAndOverwritesMismatch(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 4096}
	arr := mustArray(t, g)
	m := newMem(g)
	img := randomImage(g, 11)
	m.writeImage(g, img)
	const diff, bad = 1000, 1500 // sectors: a real difference, a bad block (both in step 0)
	m.cache[0][diff<<9] ^= 0x5a
	m.durable[0][diff<<9] ^= 0x5a
	mine := append([]byte(nil), m.sector(0, diff)...)
	var healed atomic.Bool
	m.failRead = func(role int, sector, sectors uint64) error {
		if role == 0 && sector < bad+8 && sector+sectors > bad && !healed.Load() {
			return errInjected
		}
		return nil
	}
	m.failWrite = func(role int, sector, sectors uint64) error {
		if role == 0 && sector <= bad && sector+sectors >= bad+8 {
			healed.Store(true)
		}
		return nil
	}
	s, _ := newSyncer(arr, m, Config{})
	res, err := s.Run(context.Background(), Job{Kind: Check})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("check: %d mismatches, %d read errors, bad block rewritten %v", res.Mismatches, res.ReadErrors, healed.Load())
	if res.Mismatches == 0 {
		t.Errorf("check counted no mismatch; the copies differ at sector %d, which both members read", diff)
	}
	if !bytes.Equal(m.sector(0, diff), mine) {
		t.Errorf("check wrote member 0's sector %d (readable, only different from member 1's): a check writes only what a member failed to read", diff)
	}
}

// Found by review. A check of a raid1 x2 whose two members each fail one read of a
// different 4 KiB block of the same 1 MiB step (two bad sectors, each
// readable on the other copy and cured by a rewrite): every block has a
// readable copy, so md's check rewrites each bad block from the other
// mirror (fix_sync_read_error, page by page) and fails nobody. Here each
// member's whole-step read failed, no copy was "readable" for the step,
// and the check stopped with ErrNoCopy and reported both members as failing
// (OnMemberError: the array fails member 0, degrading the array for two
// recoverable sectors). The resync and the rebuild narrow a failed read
// to RetryUnit blocks (readOne); the check did not.
func TestCheckTwoBadBlocksOnDifferentCopies(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 2, ChunkSectors: 128, MemberSectors: 4096}
	arr := mustArray(t, g)
	m := newMem(g)
	img := randomImage(g, 12)
	m.writeImage(g, img)
	bad := [2]uint64{1500, 100} // member 0's and member 1's bad block
	var healed [2]atomic.Bool
	m.failRead = func(role int, sector, sectors uint64) error {
		if b := bad[role]; sector < b+8 && sector+sectors > b && !healed[role].Load() {
			return errInjected
		}
		return nil
	}
	m.failWrite = func(role int, sector, sectors uint64) error {
		if b := bad[role]; sector <= b && sector+sectors >= b+8 {
			healed[role].Store(true)
		}
		return nil
	}
	s, _ := newSyncer(arr, m, Config{})
	var told []int
	res, err := s.Run(context.Background(), Job{Kind: Check, OnMemberError: func(role int, _ error) { told = append(told, role) }})
	t.Logf("check: %v; %d mismatches, %d read errors; members reported failing: %v", err, res.Mismatches, res.ReadErrors, told)
	if err != nil || len(told) != 0 {
		t.Fatalf("check with one bad block on each copy (each readable on the other): %v, members reported failing %v", err, told)
	}
	assertCopiesEqual(t, g, m, img, "after the check")
}

// Repair with a bad block on the chosen copy (member 0) and a real
// difference elsewhere in the same step: the difference is counted and
// repaired from member 0 where member 0 read it, the bad block is
// rewritten from member 1, and every copy ends equal to member 0's data
// there and member 1's at the bad block.
func TestRepairNarrowsReadErrorOnChosenCopy(t *testing.T) {
	g := engine.Geometry{Level: engine.Level1, Members: 3, ChunkSectors: 128, MemberSectors: 4096}
	arr := mustArray(t, g)
	m := newMem(g)
	img := randomImage(g, 13)
	m.writeImage(g, img)
	const diff, bad = 1000, 1504
	m.cache[2][diff<<9] ^= 0x5a // member 2 differs: repaired from member 0
	m.durable[2][diff<<9] ^= 0x5a
	var healed atomic.Bool
	m.failRead = func(role int, sector, sectors uint64) error {
		if role == 0 && sector < bad+8 && sector+sectors > bad && !healed.Load() {
			return errInjected
		}
		return nil
	}
	m.failWrite = func(role int, sector, sectors uint64) error {
		if role == 0 && sector <= bad && sector+sectors >= bad+8 {
			if sector != bad || sectors != 8 {
				t.Errorf("read repair wrote member 0 at %d+%d; want only the block that failed, %d+8", sector, sectors, bad)
			}
			healed.Store(true)
		}
		return nil
	}
	s, _ := newSyncer(arr, m, Config{})
	res, err := s.Run(context.Background(), Job{Kind: Repair})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mismatches != 1 || res.Repaired != 1 || res.ReadErrors != 1 || !healed.Load() {
		t.Errorf("repair: %d mismatches, %d repaired, %d read errors, bad block rewritten %v; want 1, 1, 1, true", res.Mismatches, res.Repaired, res.ReadErrors, healed.Load())
	}
	assertCopiesEqual(t, g, m, img, "after the repair")
}
