package resync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ublk-raid/ublk-raid/engine"
)

// stripeBarrier records the array range raised; its members check that
// every member I/O of a parity job is inside a raised stripe.
type stripeBarrier struct {
	lo, hi uint64 // raised array range [lo, hi); hi 0: none
	raises int
}

func (b *stripeBarrier) Raise(_ context.Context, sector, sectors uint64) error {
	if b.hi != 0 {
		return errors.New("raised twice")
	}
	b.lo, b.hi = sector, sector+sectors
	b.raises++
	return nil
}

func (b *stripeBarrier) Lower() { b.hi = 0 }

// lockedMembers fails any I/O to a stripe whose array range is not
// raised.
type lockedMembers struct {
	*memMembers
	g   engine.ParityGeometry
	bar *stripeBarrier
}

func (m lockedMembers) inside(sector uint64) error {
	per := m.g.ChunkSectors * uint64(m.g.DataMembers())
	s := sector / m.g.ChunkSectors
	if m.bar.hi == 0 || s*per < m.bar.lo || (s+1)*per > m.bar.hi {
		return fmt.Errorf("I/O at member sector %d (stripe %d) outside the raised range [%d, %d)", sector, s, m.bar.lo, m.bar.hi)
	}
	return nil
}

func (m lockedMembers) ReadAt(role int, p []byte, sector uint64) error {
	if err := m.inside(sector); err != nil {
		return err
	}
	return m.memMembers.ReadAt(role, p, sector)
}

func (m lockedMembers) WriteAt(role int, p []byte, sector uint64) error {
	if err := m.inside(sector); err != nil {
		return err
	}
	return m.memMembers.WriteAt(role, p, sector)
}

func newParityMem(g engine.ParityGeometry) *memMembers {
	m := &memMembers{flushes: make([]int, g.Members)}
	for range g.Members {
		m.cache = append(m.cache, make([]byte, g.MemberSectors<<9))
		m.durable = append(m.durable, make([]byte, g.MemberSectors<<9))
	}
	return m
}

// parityRowsWrong counts the 4 KiB rows of the members' stripes whose P or
// Q is not that of their data (computed here stripe by stripe, whole
// chunks).
func parityRowsWrong(t *testing.T, g engine.ParityGeometry, m *memMembers) int {
	t.Helper()
	par, err := engine.NewParity(g.DataMembers(), g.Level == engine.Level6)
	if err != nil {
		t.Fatal(err)
	}
	cb := int(g.ChunkSectors << 9)
	want := [][]byte{make([]byte, cb), make([]byte, cb)}[:par.Count()]
	data := make([][]byte, g.DataMembers())
	wrong := 0
	for s := range g.Stripes() {
		sm := g.Stripe(s)
		off := int(s) * cb
		for i := range g.Members {
			if sl := sm.Slot[i]; sl >= 0 {
				data[sl] = m.cache[i][off : off+cb]
			}
		}
		if err := par.Compute(data, want); err != nil {
			t.Fatal(err)
		}
		for row := 0; row < cb; row += 4096 {
			p := m.cache[sm.P][off+row : off+row+4096]
			bad := !bytes.Equal(p, want[0][row:row+4096])
			if sm.Q >= 0 {
				bad = bad || !bytes.Equal(m.cache[sm.Q][off+row:off+row+4096], want[1][row:row+4096])
			}
			if bad {
				wrong++
			}
		}
	}
	return wrong
}

func parityTestGeometries() []engine.ParityGeometry {
	var gs []engine.ParityGeometry
	for _, l := range []engine.Level{engine.Level5, engine.Level6} {
		lo := 3
		if l == engine.Level6 {
			lo = 4
		}
		for n := lo; n <= 6; n++ {
			lay := engine.ParityLayout(n % 4)
			// Small chunks (many stripes), and a chunk of several pieces;
			// member sizes leaving a partial last chunk.
			gs = append(gs, engine.ParityGeometry{Level: l, Members: n, Layout: lay, ChunkSectors: 16, MemberSectors: 23*16 + 5})
		}
		gs = append(gs, engine.ParityGeometry{Level: l, Members: 5, Layout: engine.LeftSymmetric, ChunkSectors: 2048, MemberSectors: 3*2048 + 100})
	}
	return gs
}

// A parity check counts the rows whose parity is wrong and writes nothing;
// a resync makes every stripe's parity right (a check then finds none); a
// repair rewrites one corrupted P (and Q) row, counted as one each; a
// resync limited by Need changes only what it accepts; check and resync
// of an array with as many members out of sync as the parity covers
// (raid5: one, raid6: two) stop with ErrDegraded. Every member I/O is
// inside the stripe raised.
func TestParityResyncCheckRepair(t *testing.T) {
	for _, g := range parityTestGeometries() {
		t.Run(fmt.Sprintf("%s-%dx%s-c%d", g.Level, g.Members, g.Layout, g.ChunkSectors), func(t *testing.T) {
			arr, err := engine.NewParityArray(g)
			if err != nil {
				t.Fatal(err)
			}
			mem := newParityMem(g)
			mem.fillRandom(uint64(g.Members) * uint64(g.ChunkSectors))
			bar := &stripeBarrier{}
			s := New(arr, bar, lockedMembers{mem, g, bar}, Config{})
			ctx := context.Background()
			wrong := parityRowsWrong(t, g, mem)
			before := mem.snapshot()
			res, err := s.Run(ctx, Job{Kind: Check})
			if err != nil {
				t.Fatal(err)
			}
			if res.Mismatches != uint64(wrong) || wrong == 0 {
				t.Fatalf("check counted %d rows, %d are wrong", res.Mismatches, wrong)
			}
			if !mem.equal(before) {
				t.Fatal("check wrote a member")
			}
			// A resync of the second stripe only.
			per := g.ChunkSectors * uint64(g.DataMembers())
			only := func(a, n uint64) bool { return a < 2*per && a+n > per }
			if _, err := s.Run(ctx, Job{Kind: Resync, Need: only}); err != nil {
				t.Fatal(err)
			}
			for i := range g.Members {
				cb := int(g.ChunkSectors << 9)
				if !bytes.Equal(mem.cache[i][:cb], before[i][:cb]) || !bytes.Equal(mem.cache[i][2*cb:], before[i][2*cb:]) {
					t.Fatalf("a resync of stripe 1 wrote member %d elsewhere", i)
				}
			}
			if n := parityRowsWrong(t, g, mem); n >= wrong {
				t.Fatalf("after stripe 1's resync %d rows wrong (%d before)", n, wrong)
			}
			if res, err = s.Run(ctx, Job{Kind: Resync}); err != nil {
				t.Fatal(err)
			}
			if n := parityRowsWrong(t, g, mem); n != 0 {
				t.Fatalf("%d rows wrong after a resync", n)
			}
			if res, err = s.Run(ctx, Job{Kind: Check}); err != nil || res.Mismatches != 0 {
				t.Fatalf("check after resync: %+v, %v", res, err)
			}
			// One row of P wrong in the last stripe; raid6: one of Q in
			// the first.
			last := g.Stripes() - 1
			sm := g.Stripe(last)
			off := (last*g.ChunkSectors + g.ChunkSectors - 8) << 9
			mem.cache[sm.P][off+100] ^= 1
			corrupt := uint64(1)
			if g.Level == engine.Level6 {
				mem.cache[g.Stripe(0).Q][7] ^= 0x80
				corrupt++
			}
			if res, err = s.Run(ctx, Job{Kind: Check}); err != nil || res.Mismatches != corrupt {
				t.Fatalf("check of %d corrupted rows: %+v, %v", corrupt, res, err)
			}
			if res, err = s.Run(ctx, Job{Kind: Repair}); err != nil || res.Mismatches != corrupt {
				t.Fatalf("repair of %d corrupted rows: %+v, %v", corrupt, res, err)
			}
			if n := parityRowsWrong(t, g, mem); n != 0 {
				t.Fatalf("%d rows wrong after a repair", n)
			}
			arr.Update(func(ms []engine.MemberStatus) {
				ms[1].State = engine.MemberFaulty
				if g.Level == engine.Level6 {
					ms[2].State = engine.MemberMissing
				}
			})
			mem.cache[g.Stripe(0).P][0] ^= 1
			for _, k := range []Kind{Check, Repair, Resync} {
				if _, err := s.Run(ctx, Job{Kind: k}); !errors.Is(err, ErrDegraded) {
					t.Fatalf("%s of a degraded array: %v", k, err)
				}
			}
		})
	}
}

// A rebuild reconstructs one lost member (raid6: two, or one) from the
// others, data and parity alike, byte for byte, from its start or resumed
// part-way (rounded down to the stripe); the part below the start and
// stripes Need refuses are left alone; a target failed meanwhile stops
// it; too many members lost fail it with ErrNoCopy.
func TestParityRebuild(t *testing.T) {
	for _, g := range parityTestGeometries() {
		t.Run(fmt.Sprintf("%s-%dx%s-c%d", g.Level, g.Members, g.Layout, g.ChunkSectors), func(t *testing.T) {
			mem := newParityMem(g)
			mem.fillRandom(uint64(g.Members)*7 + g.ChunkSectors)
			arr, err := engine.NewParityArray(g)
			if err != nil {
				t.Fatal(err)
			}
			bar := &stripeBarrier{}
			s := New(arr, bar, lockedMembers{mem, g, bar}, Config{})
			ctx := context.Background()
			if _, err := s.Run(ctx, Job{Kind: Resync}); err != nil {
				t.Fatal(err)
			}
			good := mem.snapshot()
			targetSets := [][]int{{0}, {g.Members - 1}}
			if g.Level == engine.Level6 {
				targetSets = append(targetSets, []int{1, g.Members - 2}, []int{0, 2})
			}
			used := g.Stripes() * g.ChunkSectors << 9
			for _, targets := range targetSets {
				for _, start := range []uint64{0, 2*g.ChunkSectors + 5} {
					for _, tg := range targets {
						fillBytes(mem.cache[tg], uint64(tg)+start)
					}
					junk := mem.snapshot()
					startRebuild(arr, targets...)
					var durable []uint64
					if _, err := s.Run(ctx, Job{Kind: Rebuild, Targets: targets, Start: start, Progress: advance(arr, targets, &durable)}); err != nil {
						t.Fatal(err)
					}
					from := (start - start%g.ChunkSectors) << 9
					for _, tg := range targets {
						if !bytes.Equal(mem.cache[tg][from:used], good[tg][from:used]) {
							t.Fatalf("targets %v from %d: member %d not rebuilt", targets, start, tg)
						}
						if !bytes.Equal(mem.cache[tg][:from], junk[tg][:from]) {
							t.Fatalf("targets %v from %d: member %d written below the start", targets, start, tg)
						}
					}
					finishRebuild(arr, targets...)
					copy(mem.cache[targets[0]], good[targets[0]])
					for _, tg := range targets {
						copy(mem.cache[tg], good[tg])
					}
				}
			}
			// Need refusing stripe 1: its chunk is left alone.
			per := g.ChunkSectors * uint64(g.DataMembers())
			fillBytes(mem.cache[0], 99)
			junk := mem.snapshot()
			startRebuild(arr, 0)
			need := func(a, n uint64) bool { return a != per }
			if _, err := s.Run(ctx, Job{Kind: Rebuild, Targets: []int{0}, Need: need, Progress: advance(arr, []int{0}, nil)}); err != nil {
				t.Fatal(err)
			}
			cb := g.ChunkSectors << 9
			if !bytes.Equal(mem.cache[0][cb:2*cb], junk[0][cb:2*cb]) || !bytes.Equal(mem.cache[0][2*cb:used], good[0][2*cb:used]) {
				t.Fatal("a rebuild with stripe 1 not needed")
			}
			finishRebuild(arr, 0)
			copy(mem.cache[0], good[0])
			// A source failing every read of a region (its rewrite from
			// the parity reads back failing too): failed, and rebuilt
			// around while the parity covers it (raid6); raid5 stops
			// with ErrNoCopy, failing nobody (rows no copy can be read
			// from: md's handle_failed_sync). (A bad sector the rewrite
			// cures: the array's TestParityRebuildRewritesSourceReadErrors.)
			fillBytes(mem.cache[0], 98)
			startRebuild(arr, 0)
			var failed []int
			onErr := func(role int, err error) {
				failed = append(failed, role)
				arr.Update(func(ms []engine.MemberStatus) { ms[role].State = engine.MemberFaulty })
			}
			mem.failRead = func(role int, sector, _ uint64) error {
				if role == 2 && sector >= g.ChunkSectors {
					return errors.New("EIO")
				}
				return nil
			}
			_, err = s.Run(ctx, Job{Kind: Rebuild, Targets: []int{0}, Progress: advance(arr, []int{0}, nil), OnMemberError: onErr})
			mem.failRead = nil
			if g.Level == engine.Level5 && len(failed) != 0 || g.Level != engine.Level5 && (len(failed) != 1 || failed[0] != 2) {
				t.Fatalf("members failed by the read error: %v", failed)
			}
			if g.Level == engine.Level5 {
				if !errors.Is(err, engine.ErrNoCopy) {
					t.Fatalf("raid5 rebuild with a source failing: %v", err)
				}
			} else if err != nil || !bytes.Equal(mem.cache[0][:used], good[0][:used]) {
				t.Fatalf("raid6 rebuild with a source failing: %v, rebuilt right %v", err, bytes.Equal(mem.cache[0][:used], good[0][:used]))
			}
			arr.Update(func(ms []engine.MemberStatus) {
				ms[0] = engine.MemberStatus{State: engine.MemberActive}
				ms[2] = engine.MemberStatus{State: engine.MemberActive}
			})
			copy(mem.cache[0], good[0])
			// More members lost than the parity covers.
			lost := []int{1}
			if g.Level == engine.Level6 {
				lost = append(lost, 2)
			}
			arr.Update(func(ms []engine.MemberStatus) {
				for _, l := range lost {
					ms[l].State = engine.MemberFaulty
				}
			})
			startRebuild(arr, 0)
			if _, err := s.Run(ctx, Job{Kind: Rebuild, Targets: []int{0}}); !errors.Is(err, engine.ErrNoCopy) {
				t.Fatalf("rebuild with %d more members lost: %v", len(lost), err)
			}
			// A target failed during the job stops it.
			arr.Update(func(ms []engine.MemberStatus) {
				for _, l := range lost {
					ms[l].State = engine.MemberActive
				}
			})
			startRebuild(arr, 0)
			fail := func(reached, _ uint64) error {
				if reached >= 2*g.ChunkSectors {
					arr.Update(func(ms []engine.MemberStatus) { ms[0].State = engine.MemberFaulty })
				}
				return nil
			}
			if _, err := s.Run(ctx, Job{Kind: Rebuild, Targets: []int{0}, Progress: fail}); !errors.Is(err, ErrTargetGone) {
				t.Fatalf("rebuild of a target failed meanwhile: %v", err)
			}
		})
	}
}

// snapshot copies every member's cache.
func (m *memMembers) snapshot() [][]byte {
	out := make([][]byte, len(m.cache))
	for i, c := range m.cache {
		out[i] = bytes.Clone(c)
	}
	return out
}

// equal reports whether every member's cache is as in snap.
func (m *memMembers) equal(snap [][]byte) bool {
	for i, c := range m.cache {
		if !bytes.Equal(c, snap[i]) {
			return false
		}
	}
	return true
}

// A check or repair rewrites what a member could not read from the
// parity (md's scrub), as many members per piece as the parity covers,
// and reads it back: no member fails, nothing else changes, and the
// rewritten bytes are the stripe's. A resync does so for P and Q only (a
// data member failing a read fails: the parity is not trusted yet); a
// timeout (Unrepairable), or a rewrite that does not read back, fails the
// member.
func TestParityReadErrorRewritten(t *testing.T) {
	for _, g := range parityTestGeometries() {
		t.Run(fmt.Sprintf("%s-%dx%s-c%d", g.Level, g.Members, g.Layout, g.ChunkSectors), func(t *testing.T) {
			mem, s := resyncedParityMem(t, g, uint64(g.Members)*7)
			ctx := context.Background()
			good := mem.snapshot()
			// Latent errors in stripe 1 (sectors 3..5 of its chunk): the
			// bytes are lost and reads fail until the sectors are
			// written.
			const lo, hi = 3, 6
			sm := g.Stripe(1)
			base := g.ChunkSectors
			latent := map[int]bool{}
			corrupt := func(roles ...int) {
				for _, r := range roles {
					latent[r] = true
					fillBytes(mem.cache[r][(base+lo)<<9:(base+hi)<<9], 77)
				}
			}
			stuck := false // writes do not clear the error
			lossy := false // writes clear the error but their bytes are lost
			mem.failRead = func(role int, sector, n uint64) error {
				in := sector < base+hi && sector+n > base+lo
				if latent[role] && in {
					return errors.New("EIO")
				}
				if lossy && role == int(sm.Data[1]) && in {
					fillBytes(mem.cache[role][(base+lo)<<9:(base+hi)<<9], 78)
				}
				return nil
			}
			mem.failWrite = func(role int, sector, n uint64) error {
				if !stuck && sector <= base+lo && sector+n >= base+hi {
					delete(latent, role)
				}
				return nil
			}
			var failed []int
			told := uint64(0)
			job := func(k Kind) Job {
				return Job{Kind: k, OnMemberError: func(role int, err error) { failed = append(failed, role) },
					Unrepairable:         func(err error) bool { return err.Error() == "timeout" },
					OnReadErrorRewritten: func(int) { told++ }}
			}
			data := int(sm.Data[1])
			bad := []int{data}
			if g.Level == engine.Level6 {
				bad = append(bad, sm.Q)
			}
			for _, k := range []Kind{Check, Repair} {
				corrupt(bad...)
				res, err := s.Run(ctx, job(k))
				if err != nil || len(failed) > 0 || res.ReadErrors != uint64(len(bad)) || res.ReadErrorsRewritten != uint64(len(bad)) || res.Mismatches != 0 || told != uint64(len(bad)) {
					t.Fatalf("%s over read errors of %v: %+v, %v, failed %v, told %d", k, bad, res, err, failed, told)
				}
				told = 0
				if !mem.equal(good) {
					t.Fatalf("%s: the members are not as before the read errors", k)
				}
			}
			// More members failing than the parity covers: the rows are
			// lost, left as they are (still unreadable), nobody fails, and
			// the job goes on to the end (md's scrub).
			over := []int{sm.P, data}
			if g.Level == engine.Level6 {
				over = append(over, sm.Q)
			}
			corrupt(over...)
			for _, k := range []Kind{Check, Repair} {
				res, err := s.Run(ctx, job(k))
				if err != nil || len(failed) != 0 || res.LostRows == 0 {
					t.Fatalf("%s over %d read errors in a piece: %+v, %v, failed %v", k, len(over), res, err, failed)
				}
				for _, r := range over {
					if !latent[r] {
						t.Fatalf("%s wrote over the lost rows of member %d", k, r)
					}
				}
			}
			clear(latent)
			failed = nil
			for r := range g.Members {
				copy(mem.cache[r], good[r])
			}
			// Resync: P is rewritten, a data member fails.
			corrupt(sm.P)
			if res, err := s.Run(ctx, job(Resync)); err != nil || len(failed) > 0 || res.ReadErrorsRewritten != 1 || !mem.equal(good) {
				t.Fatalf("resync over a read error of P: %+v, %v, failed %v", res, err, failed)
			}
			corrupt(data)
			if _, err := s.Run(ctx, job(Resync)); err == nil || len(failed) != 1 || failed[0] != data {
				t.Fatalf("resync over a read error of data: %v, failed %v", err, failed)
			}
			clear(latent)
			failed = nil
			// A rewrite that does not read back, or reads back different; a
			// timeout.
			stuck = true
			corrupt(data)
			if _, err := s.Run(ctx, job(Check)); err == nil || !strings.Contains(err.Error(), "reading back the rewrite") || len(failed) != 1 {
				t.Fatalf("check over a read error that stays: %v, failed %v", err, failed)
			}
			failed = nil
			stuck, lossy = false, true
			corrupt(data)
			if _, err := s.Run(ctx, job(Check)); err == nil || !strings.Contains(err.Error(), "read back different") || len(failed) != 1 {
				t.Fatalf("check over a read error whose rewrite is lost: %v, failed %v", err, failed)
			}
			failed = nil
			mem.failRead = func(role int, sector, n uint64) error {
				if role == data && sector < base+hi && sector+n > base+lo {
					return errors.New("timeout")
				}
				return nil
			}
			if _, err := s.Run(ctx, job(Check)); err == nil || len(failed) != 1 || failed[0] != data {
				t.Fatalf("check over a timeout: %v, failed %v", err, failed)
			}
		})
	}
}

// resyncedParityMem is a raid5/6 array of geometry g on in-memory members
// filled from seed, resynced (its parity right), and its syncer.
func resyncedParityMem(t *testing.T, g engine.ParityGeometry, seed uint64) (*memMembers, *Syncer) {
	t.Helper()
	arr, err := engine.NewParityArray(g)
	if err != nil {
		t.Fatal(err)
	}
	mem := newParityMem(g)
	mem.fillRandom(seed)
	bar := &stripeBarrier{}
	s := New(arr, bar, lockedMembers{mem, g, bar}, Config{})
	if _, err := s.Run(context.Background(), Job{Kind: Resync}); err != nil {
		t.Fatal(err)
	}
	return mem, s
}

// latentRanges makes mem fail every read that meets a role's sector range
// [lo, hi) until a write covers the whole range (a latent sector error
// that a rewrite fixes).
func latentRanges(mem *memMembers, latent map[int][2]uint64) {
	mem.failRead = func(role int, sector, n uint64) error {
		if r, ok := latent[role]; ok && sector < r[1] && sector+n > r[0] {
			return errors.New("EIO")
		}
		return nil
	}
	mem.failWrite = func(role int, sector, n uint64) error {
		if r, ok := latent[role]; ok && sector <= r[0] && sector+n >= r[1] {
			delete(latent, role)
		}
		return nil
	}
}

// A latent read error in one 4 KiB row of a data member, and a wrong P in
// another row of the same piece: the check must count the wrong P row and
// must not rewrite the readable row of the data member from that P.
func TestParityReadErrorRewrittenPerRow(t *testing.T) {
	g := engine.ParityGeometry{Level: engine.Level5, Members: 4, Layout: engine.ParityLayout(2), ChunkSectors: 64, MemberSectors: 64 * 8}
	mem, s := resyncedParityMem(t, g, 11)
	ctx := context.Background()
	sm := g.Stripe(1)
	base := g.ChunkSectors
	data := int(sm.Data[0])
	// Row 0 (sectors 0..7) of stripe 1: P silently wrong.
	fillBytes(mem.cache[sm.P][base<<9:(base+8)<<9], 99)
	// Row 2 (sectors 16..23) of stripe 1 on the data member: unreadable.
	latentRanges(mem, map[int][2]uint64{data: {base + 16, base + 24}})
	row0 := append([]byte(nil), mem.cache[data][base<<9:(base+8)<<9]...)
	res, err := s.Run(ctx, Job{Kind: Check})
	t.Logf("check: %+v, %v", res, err)
	if !bytes.Equal(mem.cache[data][base<<9:(base+8)<<9], row0) {
		t.Errorf("check overwrote the data member's readable row 0 (from the wrong P)")
	}
	if res.Mismatches == 0 {
		t.Errorf("check counted no mismatch: the wrong P row is hidden")
	}
	if err != nil || res.ReadErrorsRewritten != 1 {
		t.Errorf("check over one unreadable row: %+v, %v", res, err)
	}
}

// raid5: read errors on two members in different rows of one piece (each
// row recoverable on its own, as md's 4 KiB stripe heads recover them):
// no member should fail.
func TestParityReadErrorsInDifferentRows(t *testing.T) {
	g := engine.ParityGeometry{Level: engine.Level5, Members: 4, Layout: engine.ParityLayout(2), ChunkSectors: 64, MemberSectors: 64 * 8}
	mem, s := resyncedParityMem(t, g, 12)
	ctx := context.Background()
	sm := g.Stripe(1)
	base := g.ChunkSectors
	a, b := int(sm.Data[0]), int(sm.Data[1])
	latentRanges(mem, map[int][2]uint64{a: {base, base + 8}, b: {base + 16, base + 24}})
	var failed []int
	res, err := s.Run(ctx, Job{Kind: Check, OnMemberError: func(role int, err error) { failed = append(failed, role) }})
	t.Logf("check: %+v, %v", res, err)
	if len(failed) > 0 {
		t.Errorf("members failed: %v", failed)
	}
	if err != nil || res.ReadErrorsRewritten != 2 || res.Mismatches != 0 {
		t.Errorf("check over two unreadable rows: %+v, %v", res, err)
	}
}

// A raid6 with one member out (faulty, missing, or rebuilding not that
// far) is checked, repaired and resynced around it, as md's
// handle_parity_checks6: with Q lost P is checked, with P lost Q, with a
// data member lost its data is reconstructed from P and Q is checked. A
// wrong row of the parity left is counted and rewritten; the lost
// member's bytes are never read (wrong there, nothing is counted) nor
// written.
func TestParityRaid6OneOut(t *testing.T) {
	for _, g := range parityTestGeometries() {
		if g.Level != engine.Level6 {
			continue
		}
		sm := g.Stripe(0)
		data := 0
		for data == sm.P || data == sm.Q {
			data++
		}
		for _, c := range []struct {
			name      string
			lost      int
			state     engine.MemberState
			remaining int // the parity member left to check
		}{
			{"Q-faulty", sm.Q, engine.MemberFaulty, sm.P},
			{"P-missing", sm.P, engine.MemberMissing, sm.Q},
			{"data-faulty", data, engine.MemberFaulty, sm.Q},
			{"data-rebuilding", data, engine.MemberRebuilding, sm.Q},
		} {
			t.Run(fmt.Sprintf("%d%s-c%d-%s", g.Members, g.Layout, g.ChunkSectors, c.name), func(t *testing.T) {
				mem, s := resyncedParityMem(t, g, 21)
				ctx := context.Background()
				s.arr.Update(func(ms []engine.MemberStatus) { ms[c.lost].State = c.state })
				good := mem.snapshot()
				// The lost member's bytes wrong: not read, so not counted.
				mem.cache[c.lost][5] ^= 0xff
				lostBytes := bytes.Clone(mem.cache[c.lost])
				if res, err := s.Run(ctx, Job{Kind: Check}); err != nil || res.Mismatches != 0 {
					t.Fatalf("check of a consistent array, member %d %s: %+v, %v", c.lost, c.state, res, err)
				}
				// One row of the parity left wrong, in stripe 0.
				mem.cache[c.remaining][4096+9] ^= 1
				before := mem.snapshot()
				if res, err := s.Run(ctx, Job{Kind: Check}); err != nil || res.Mismatches != 1 {
					t.Fatalf("check of one wrong row of member %d: %+v, %v", c.remaining, res, err)
				}
				if !mem.equal(before) {
					t.Fatal("check wrote a member")
				}
				if res, err := s.Run(ctx, Job{Kind: Repair}); err != nil || res.Mismatches != 1 || res.Repaired != 1 {
					t.Fatalf("repair of one wrong row of member %d: %+v, %v", c.remaining, res, err)
				}
				for i := range g.Members {
					if i != c.lost && !bytes.Equal(mem.cache[i], good[i]) {
						t.Fatalf("after the repair member %d differs from the consistent array", i)
					}
				}
				if !bytes.Equal(mem.cache[c.lost], lostBytes) {
					t.Fatal("the lost member was written")
				}
				// A resync too: the parity left made right again.
				mem.cache[c.remaining][9] ^= 1
				if res, err := s.Run(ctx, Job{Kind: Resync}); err != nil || res.Repaired != 1 {
					t.Fatalf("resync around member %d: %+v, %v", c.lost, res, err)
				}
				if !bytes.Equal(mem.cache[c.remaining], good[c.remaining]) || !bytes.Equal(mem.cache[c.lost], lostBytes) {
					t.Fatal("the resync did not rewrite the parity left, or wrote the lost member")
				}
				// A second member out: refused.
				other := (c.lost + 1) % g.Members
				s.arr.Update(func(ms []engine.MemberStatus) { ms[other].State = engine.MemberFaulty })
				for _, k := range []Kind{Check, Repair, Resync} {
					if _, err := s.Run(ctx, Job{Kind: k}); !errors.Is(err, ErrDegraded) {
						t.Fatalf("%s of a raid6 with two members out: %v", k, err)
					}
				}
			})
		}
	}
}
