package array

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/ublk-raid/ublk-raid/engine"
	"github.com/ublk-raid/ublk-raid/metrics"
)

// queueStats are one queue's counters, written by its thread only and read
// at scrape time.
type queueStats struct {
	ops []atomic.Pointer[memberCounters] // per role
}

// memberCounters count the operations of one device in one role. They
// are the device's series (the "member" label is its path's), not the
// role's: a device that takes the role (a replacement, a spare) starts
// new ones, the same device re-added goes on with its own.
type memberCounters struct {
	path string
	ops  [metrics.NumOps]metrics.OpCounter
}

// countersFor returns slot's counters for the device at path: new ones
// when they are another device's.
func countersFor(slot *atomic.Pointer[memberCounters], path string) *memberCounters {
	for {
		c := slot.Load()
		if c != nil && c.path == path {
			return c
		}
		n := &memberCounters{path: path}
		if slot.CompareAndSwap(c, n) {
			return n
		}
	}
}

// freshCounters gives role new counters for the device at path, on the
// array and on every queue: another device taking the role (a replacement,
// a spare) starts its own even under the path of the one it replaces (a
// new disk under the failed one's name). A queue thread counting one more
// operation on the old ones meanwhile counts it nowhere.
func (a *Array) freshCounters(role int, path string) {
	if role >= 0 && role < len(a.memberOps) {
		a.memberOps[role].Store(&memberCounters{path: path})
	}
	a.qmu.Lock()
	defer a.qmu.Unlock()
	for _, h := range a.queues {
		if role >= 0 && role < len(h.stats.ops) {
			h.stats.ops[role].Store(&memberCounters{path: path})
		}
	}
}

// addCounters adds slot's counters to ms if they are the device at path's.
func addCounters(ms *metrics.MemberStats, slot *atomic.Pointer[memberCounters], path string) {
	c := slot.Load()
	if c == nil || c.path != path {
		return
	}
	for op := range metrics.NumOps {
		o := c.ops[op].Snapshot()
		ms.Ops[op].Add(&o)
	}
}

func opOf(k engine.IOKind) (metrics.Op, bool) {
	switch k {
	case engine.IORead:
		return metrics.OpRead, true
	case engine.IOWrite, engine.IOWriteZeroes:
		return metrics.OpWrite, true
	case engine.IOFlush:
		return metrics.OpFlush, true
	case engine.IODiscard:
		return metrics.OpDiscard, true
	}
	return 0, false
}

// opDone is the executor's OpDone: count the member operation, on the
// device it went to. One whose device has left the role since (replaced)
// counts nowhere: that device's series are gone, and its late result is
// not the new device's.
func (h *queue) opDone(tag uint16, id engine.OpID, member int32, kind engine.IOKind, sectors uint32, res int32, d time.Duration) {
	op, ok := opOf(kind)
	if !ok || int(member) >= len(h.stats.ops) {
		return
	}
	sent, cur := h.sentTo(tag, id, engine.MemberIO{Member: member}), h.a.current[member].Load()
	if sent == nil || cur == nil || sent.m.Path != cur.m.Path {
		return
	}
	var bytes uint64
	if kind != engine.IOFlush {
		bytes = uint64(sectors) << 9
	}
	// Failed as the executor takes it: an error, or a read or write that
	// moved fewer bytes than asked (which fails the member too). A
	// discard or write-zeroes the member refused (engine.Refused: it
	// lacks the command) is no error of the member but an operation that
	// did nothing: counted as an error, the member errors alert would
	// name a healthy disk after every fstrim or mkfs. A discard's other
	// errors (EIO) count, though they fail no member: the device
	// reported an I/O error.
	refused := engine.Refused(kind, res)
	if refused {
		bytes = 0
	}
	failed := (res < 0 && !refused) || ((kind == engine.IORead || kind == engine.IOWrite) && int64(res) != int64(bytes))
	countersFor(&h.stats.ops[member], cur.m.Path).ops[op].Done(bytes, d, failed)
}

// countMemberOp counts an operation on device m in role issued outside
// the queues (a background job's, the bitmap's): n bytes, taking d,
// failed when err is not nil. Like a queue's (opDone), it counts nowhere
// when m has left the role since.
func (a *Array) countMemberOp(role int, m *Member, op metrics.Op, n int, d time.Duration, err error) {
	if role < 0 || role >= len(a.memberOps) || m == nil {
		return
	}
	if cur := a.current[role].Load(); cur == nil || cur.m.Path != m.Path {
		return
	}
	var bytes uint64
	if op != metrics.OpFlush {
		bytes = uint64(n)
	}
	countersFor(&a.memberOps[role], m.Path).ops[op].Done(bytes, d, err != nil)
}

// parityStats sums the queues' parity counters (a.qmu held).
func (a *Array) parityStats() *metrics.ParityStats {
	p := &metrics.ParityStats{LogCheckpoints: a.logCPs.Load()}
	kinds := [engine.NumParityStatWrites]metrics.ParityWrite{
		engine.ParityStatRMW:         metrics.ParityRMW,
		engine.ParityStatRCW:         metrics.ParityRCW,
		engine.ParityStatFull:        metrics.ParityFull,
		engine.ParityStatReconstruct: metrics.ParityReconstruct,
		engine.ParityStatDataOnly:    metrics.ParityDataOnly,
	}
	for _, h := range a.queues {
		pr, ok := h.exec.(parityRunner)
		if !ok {
			continue
		}
		st := &pr.Stats
		for k, m := range kinds {
			p.Writes[m] += st.Writes[k].Load()
		}
		p.ReconstructReads += st.ReconstructReads.Load()
		p.StripeWaits += st.StripeWaits.Load()
		p.DirectReads += st.DirectReads.Load()
		p.BufferWaits += st.BufferWaits.Load()
		p.LogEntries += st.LogEntries.Load()
		p.LogWaits += st.LogWaits.Load()
		p.Healed += st.Healed.Load()
		p.Unhealed += st.Unhealed.Load()
	}
	return p
}

// Metrics is a snapshot of the array for the Prometheus collector; device
// is its block device name without /dev/ (e.g. "ublkb0").
func (a *Array) Metrics(device string) metrics.ArrayStats {
	s := a.Status()
	sy := a.SyncStatus()
	out := metrics.ArrayStats{Device: device, Name: s.Name, Level: s.Level, Layout: s.Layout,
		RaidDisks: s.RaidDisks, Size: s.SizeBytes}
	switch sy.Action {
	case "rebuild":
		out.State = metrics.ArrayRecovering
		// Member bytes rebuilt, as a share of the array.
		if sy.Total > 0 {
			out.Synced = uint64(float64(s.SizeBytes) * float64(sy.Done) / float64(sy.Total))
		}
	case "resync", "repair":
		out.State = metrics.ArrayResync
		out.Synced = sy.Done
	case "check":
		out.State = metrics.ArrayCheck
		out.Synced = sy.Done
	default:
		out.State = metrics.ArrayActive
	}
	if a.Engine.Broken() {
		out.State = metrics.ArrayBroken // (raid0: no sync runs)
	}
	out.SyncSpeed = sy.SpeedBytes
	out.MismatchSectors = sy.MismatchCnt
	out.ReadRepairs = a.readRepairs.Load()
	if bm := a.Bitmap; bm != nil {
		bs := bm.Stats()
		var data uint64
		a.qmu.Lock()
		for _, h := range a.queues {
			data += h.bitmapWrites.Load()
		}
		a.qmu.Unlock()
		out.Bitmap = &metrics.BitmapStats{Regions: uint64(bs.Regions), DirtyRegions: uint64(bs.DirtyRegions),
			BlockWrites: a.bitmapBlockWrites.Load(), DataWrites: data, Waited: bs.WaitedWrites,
			Wait: a.bitmapWait.Snapshot()}
	}
	a.qmu.Lock()
	defer a.qmu.Unlock()
	if a.Engine.Parity != nil {
		out.Parity = a.parityStats()
	}
	for _, m := range s.Members {
		if m.Path == "" && m.State == "faulty" {
			out.FailedSlots++ // (failed before this assembly: detail counts it)
		}
		if m.Path == "" || m.State == "missing" {
			continue // an empty slot
		}
		ms := metrics.MemberStats{Name: memberLabel(m.Path)}
		switch m.State {
		case "active":
			ms.State = metrics.MemberActive
		case "rebuilding":
			ms.State = metrics.MemberRebuilding
		default:
			ms.State = metrics.MemberFailed
		}
		if m.Role < len(a.memberOps) {
			addCounters(&ms, &a.memberOps[m.Role], m.Path)
		}
		for _, h := range a.queues {
			if m.Role < len(h.stats.ops) {
				addCounters(&ms, &h.stats.ops[m.Role], m.Path)
			}
		}
		out.Members = append(out.Members, ms)
	}
	for _, p := range s.Spares {
		out.Members = append(out.Members, metrics.MemberStats{Name: memberLabel(p), State: metrics.MemberSpare})
	}
	for id, h := range a.queues {
		out.Queues = append(out.Queues, metrics.QueueStats{ID: id, InFlight: int(h.inflight.Load())})
	}

	return out
}

// memberLabel is the "member" label of the device at path: its path below
// /dev ("nvme0n1", "mapper/m0"), or the whole path elsewhere. Unique among
// an array's devices (no device is given twice), and the same for a device
// whatever else the array holds: a label derived from the others (the
// base name, made unique by role) moved from one device to another as
// members came and went, and one series carried two devices' counters.
func memberLabel(path string) string {
	if rest, ok := strings.CutPrefix(path, "/dev/"); ok && rest != "" {
		return rest
	}
	return path
}
