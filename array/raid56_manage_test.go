package array

import (
	"math/rand"
	"testing"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/resync"
)

// Management of a raid5/6 array over file members, through the real
// queue: status describes it (level, layout, size, disks); fail is
// recorded and refused for the member past the parity's budget; remove;
// replace onto a new device rebuilds the role by reconstruction in the
// background while the queue writes and reads (raid6: two roles, the
// second re-added, rebuilt from the bitmap's dirty regions); a
// spare takes a failed role by itself; replace swaps an active member
// for a new device; after each rebuild the members'
// parity is consistent and the data reads back, also with another member
// failed (so read through the rebuilt chunks); it reassembles clean.
func TestParityManage(t *testing.T) {
	for _, tc := range []struct {
		level   engine.Level
		members int
		layout  engine.ParityLayout
	}{{engine.Level5, 4, engine.LeftSymmetric}, {engine.Level6, 5, engine.RightAsymmetric}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.members)))
			const span = 4096
			a, paths, h, r, ref, id := parityGarbageArray(t, rng, tc.level, tc.members, span)
			defer func() { a.Close() }()
			pWhileSync(t, rng, a, h, r, ref, span, id)
			g := *a.Engine.Parity
			st := a.Status()
			if st.Level != tc.level.String() || st.Layout != engine.LeftSymmetric.String() || st.RaidDisks != tc.members ||
				st.SizeBytes != g.ArraySectors()<<9 || st.ChunkBytes != 16<<9 || st.State != "active" || st.ActiveDisks != tc.members {
				t.Fatalf("status: %+v", st)
			}
			// Fail members up to the parity's budget; one more refused.
			lost := []int{1, 3}[:g.ParityMembers()]
			for _, role := range lost {
				if err := a.Fail(role); err != nil {
					t.Fatal(err)
				}
				pBatch(t, rng, h, r, ref, span, id)
			}
			if err := a.Fail(0); err == nil {
				t.Fatal("failing a member past the parity's budget was accepted")
			}
			st = a.Status()
			if st.State != "degraded" || st.FailedDisks != len(lost) || st.Members[lost[0]].State != "faulty" {
				t.Fatalf("status after fail: %+v", st)
			}
			if sb := readSB(a.Members[0]).SB; sb == nil || sb.Roles[lost[0]].State != engine.RoleFaulty {
				t.Fatal("the failure is not in the superblocks")
			}
			if err := a.Check(false); err == nil {
				t.Fatal("check of a degraded array started")
			}
			for range 5 {
				pBatch(t, rng, h, r, ref, span, id)
			}
			// Replace the first onto a new device (after remove).
			if err := pDo(h, r, func() error { return a.Remove(lost[0]) }); err != nil {
				t.Fatal(err)
			}
			if st := a.Status(); st.Members[lost[0]].State != "missing" || st.MissingDisks != 1 {
				t.Fatalf("status after remove: %+v", st)
			}
			fresh := memberFiles(t, 2, 16<<20)
			if err := pDo(h, r, func() error { return a.Replace(lost[0], fresh[0]) }); err != nil {
				t.Fatal(err)
			}
			if n := pWhileSync(t, rng, a, h, r, ref, span, id); n == 0 {
				t.Log("the rebuild ended before a batch ran")
			}
			if s := a.SyncStatus(); s.LastAction != "rebuild" || s.LastResult != "ok" {
				t.Fatalf("after the replacement: %+v", s)
			}
			if len(lost) == 2 {
				// Re-add the second: only the regions written while it was
				// away are rebuilt.
				if a.Engine.State().Members[lost[1]].State != engine.MemberFaulty {
					t.Fatal("the second lost member is not faulty any more")
				}
				if err := pDo(h, r, func() error { return a.ReAdd(a.Members[lost[1]].Path) }); err != nil {
					t.Fatal(err)
				}
				pWhileSync(t, rng, a, h, r, ref, span, id)
				if s := a.SyncStatus(); s.LastAction != "rebuild" || s.LastResult != "ok" {
					t.Fatalf("after the re-add: %+v", s)
				}
			}
			if st := a.Status(); st.State != "active" || st.ActiveDisks != tc.members {
				t.Fatalf("status after the rebuilds: %+v", st)
			}
			first, last := a.Bitmap.Regions(0, span)
			_ = first
			pConsistent(t, a, uint64(last+1)*a.Bitmap.Geometry().RegionSectors)
			pReadAll(t, rng, h, r, ref, span)
			if err := a.Check(false); err != nil {
				t.Fatal(err)
			}
			a.WaitSync()
			if s := a.SyncStatus(); s.MismatchCnt != 0 || s.LastCheckResult != "ok" {
				t.Fatalf("check after the rebuilds: %+v", s)
			}
			// A spare takes the next failed role by itself.
			if err := pDo(h, r, func() error { return a.AddSpare(fresh[1]) }); err != nil {
				t.Fatal(err)
			}
			if st := a.Status(); st.SpareDisks != 1 {
				t.Fatalf("status with a spare: %+v", st)
			}
			activated := make(chan error, 1)
			a.OnSpareActivated = func(role int, path string, err error) { activated <- err }
			if err := pDo(h, r, func() error {
				if err := a.Fail(2); err != nil {
					return err
				}
				return <-activated
			}); err != nil {
				t.Fatal(err)
			}
			pWhileSync(t, rng, a, h, r, ref, span, id)
			if st := a.Status(); st.State != "active" || st.SpareDisks != 0 || st.Members[2].Path != fresh[1] {
				t.Fatalf("status after the spare's rebuild: %+v", st)
			}
			pConsistent(t, a, uint64(last+1)*a.Bitmap.Geometry().RegionSectors)
			// replace of an active member: failed once the new device
			// passed every check, then rebuilt.
			fresh = append(fresh, memberFiles(t, 1, 16<<20)[0])
			if err := pDo(h, r, func() error { return a.ReplaceMember(3, fresh[2], false) }); err != nil {
				t.Fatal(err)
			}
			pWhileSync(t, rng, a, h, r, ref, span, id)
			if st := a.Status(); st.State != "active" || st.Members[3].Path != fresh[2] {
				t.Fatalf("status after replacing an active member: %+v", st)
			}
			pConsistent(t, a, uint64(last+1)*a.Bitmap.Geometry().RegionSectors)
			// Read through the rebuilt chunks: another member failed.
			other := 0
			if err := pDo(h, r, func() error { return a.Fail(other) }); err != nil {
				t.Fatal(err)
			}
			pReadAll(t, rng, h, r, ref, span)
			if err := a.SetClean(true); err != nil {
				t.Fatal(err)
			}
			a.Close()
			var now []string
			for i, p := range paths {
				switch i {
				case lost[0]:
					p = fresh[0]
				case 2:
					p = fresh[1]
				case 3:
					p = fresh[2]
				case other:
					continue
				}
				now = append(now, p)
			}
			a, err := Open(now, CreateSpec{Level: -1}, false)
			if err != nil {
				t.Fatal(err)
			}
			if st := a.Status(); st.State != "degraded" || st.ActiveDisks != tc.members-1 {
				t.Fatalf("reassembled: %+v", st)
			}
			r = &pRing{done: map[uint16]error{}}
			h = a.newQueue(r)
			pReadAll(t, rng, h, r, ref, span)
		})
	}
}

// pDo runs fn (a management command) while the test answers the queue's
// wake-ups, as its thread would: a command that changes a role's device
// waits for every queue to take the change.
func pDo(h *queue, r *pRing, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if r.woke.Swap(false) {
			h.OnWake()
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// A parity rebuild stopped part-way (the array stopped) records its
// checkpoint, a whole stripe, in the superblocks (md's recovery offset),
// and the next assembly resumes it from there, not from 0; the rebuilt
// member is then right: parity consistent, data read through it with
// another member failed.
func TestParityRebuildResumes(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	const span = 4096
	a, paths, h, r, ref, id := parityGarbageArray(t, rng, engine.Level5, 4, span)
	defer func() { a.Close() }()
	pWhileSync(t, rng, a, h, r, ref, span, id)
	g := *a.Engine.Parity
	if err := pDo(h, r, func() error { return a.Fail(1) }); err != nil {
		t.Fatal(err)
	}
	if err := pDo(h, r, func() error { return a.Remove(1) }); err != nil {
		t.Fatal(err)
	}
	a.sync.s = resync.New(a.Engine, &stripeBarrier{a: a}, newMemberIO(a), resync.Config{MaxBytesPerSec: 128 << 10, FlushInterval: 50 * time.Millisecond})
	fresh := memberFiles(t, 1, 16<<20)[0]
	if err := pDo(h, r, func() error { return a.Replace(1, fresh) }); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); a.SyncStatus().Done < 64<<10; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || a.SyncStatus().Action != "rebuild" {
			t.Fatalf("the rebuild: %+v", a.SyncStatus())
		}
	}
	a.StopSync() // as the daemon stops an array: checkpointed, then clean
	if err := a.SetClean(true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	now := append([]string(nil), paths...)
	now[1] = fresh
	m, err := openMember(nil, fresh)
	if err != nil {
		t.Fatal(err)
	}
	sb := readSB(m).SB
	m.Close()
	if sb == nil || sb.Roles[1].State != engine.RoleRebuilding {
		t.Fatalf("the new member's superblock: %+v", sb)
	}
	off := sb.Roles[1].RecoveryOffset
	if off == 0 || off%g.ChunkSectors != 0 || off >= g.MemberSectors {
		t.Fatalf("recorded recovery offset %d (chunk %d)", off, g.ChunkSectors)
	}
	a, err = Open(now, CreateSpec{Level: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	var started []uint64
	a.SetSyncLog(func(msg string, rep SyncReport, err error) {
		if msg == "sync started" && rep.Kind == "rebuild" {
			started = append(started, rep.Position)
		}
	})
	r = &pRing{done: map[uint16]error{}}
	h = a.newQueue(r)
	a.StartBackground()
	pWhileSync(t, rng, a, h, r, ref, span, id)
	// (The regions left dirty while the role was out of sync are
	// resynced after the rebuild.)
	if s := a.SyncStatus(); s.LastResult != "ok" || s.ResyncNeeded || len(started) != 1 || started[0] != off {
		t.Fatalf("resumed rebuild started at %v, recorded %d: %+v", started, off, s)
	}
	if st := a.Status(); st.State != "active" {
		t.Fatalf("status after the resumed rebuild: %+v", st)
	}
	_, last := a.Bitmap.Regions(0, span)
	pConsistent(t, a, uint64(last+1)*a.Bitmap.Geometry().RegionSectors)
	if err := pDo(h, r, func() error { return a.Fail(2) }); err != nil {
		t.Fatal(err)
	}
	pReadAll(t, rng, h, r, ref, span)
}
