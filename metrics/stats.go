package metrics

// Source reports the current state of every array. The daemon implements it
// over the engine; the Collector calls it once per scrape.
//
// Snapshot may be called from several scrape goroutines at once and must be
// safe for that. It must not block the I/O path: it reads the engine's
// atomic counters and copies the control plane's state (which it may guard
// with the control plane's own lock). It may allocate. The returned slice
// and everything it points to belong to the caller until the next call.
type Source interface {
	Snapshot() []ArrayStats
}

// SourceFunc adapts a function to Source.
type SourceFunc func() []ArrayStats

// Snapshot calls f.
func (f SourceFunc) Snapshot() []ArrayStats { return f() }

// ArrayStats is a point-in-time snapshot of one array.
type ArrayStats struct {
	// Device is the array's block device name without /dev/, e.g.
	// "ublkb0": the "device" label of every series of the array (as md's
	// "md0" is for node_md_*). Unique per Source.
	Device string

	// Name, Level and Layout are exported by ublkraid_info: the array's
	// name ("" if none), "raid0", "raid1" or "raid10", and the raid10
	// layout such as "n2" ("" where there is none).
	Name, Level, Layout string

	// State is the array's activity: what md's sync_action would show.
	State ArrayState

	// RaidDisks is the number of member slots the layout has, like md's
	// raid_disks (node_md_disks_required). Degraded is derived from it:
	// RaidDisks minus the members in state MemberActive, at least 0.
	RaidDisks int

	// FailedSlots counts the failed roles whose device is not open (failed,
	// not removed, before the array was last assembled): counted in
	// ublkraid_disks{state="failed"} as detail counts them, without
	// member series (no device to name).
	FailedSlots int

	// Size is the array's capacity in bytes. Exported in 1 KiB blocks like
	// md's, as ublkraid_blocks.
	Size uint64

	// Synced is how far the current resync, recovery or check has got, in
	// bytes of the array. It is read only when State is ArrayRecovering,
	// ArrayResync or ArrayCheck; otherwise ublkraid_blocks_synced equals
	// ublkraid_blocks, as node_md_blocks_synced does when no sync runs.
	Synced uint64

	// SyncSpeed is the current sync rate in bytes per second (0 when none
	// runs), averaged as the engine sees fit, like md's sync_speed.
	SyncSpeed float64

	// ReadRepairs counts ranges of a copy rewritten from another copy
	// after a read error on it.
	ReadRepairs uint64

	// MismatchSectors is what the last check or repair found differing,
	// in 512-byte sectors (md's mismatch_cnt); 0 before any.
	MismatchSectors uint64

	// Bitmap is the write-intent bitmap's state, nil for an array without
	// one (then no ublkraid_bitmap_* series are exported for it).
	Bitmap *BitmapStats

	// Parity is the parity work of a raid5/6 array, nil for other levels
	// (then no ublkraid_parity_* series are exported for it).
	Parity *ParityStats

	// Members are the array's members, including failed ones not yet
	// removed and spares. Empty slots have no entry. Member names must be
	// unique within the array.
	Members []MemberStats

	// Queues are the array's ublk queues.
	Queues []QueueStats

	// UblkFlags are the ublk driver features (UBLK_F_* names, lower case
	// without the prefix) the device uses, exported by ublkraid_ublk_flag.
	UblkFlags []string
}

// ArrayState is an array's activity, exported one-hot as
// ublkraid_state{state=...}, the states of node_md_state.
type ArrayState uint8

// Array states.
const (
	// ArrayActive: serving I/O with no sync running (degraded or not).
	ArrayActive ArrayState = iota
	// ArrayInactive: known (assembled or being assembled) but not serving
	// I/O, e.g. too few members to start.
	ArrayInactive
	// ArrayRecovering: rebuilding one or more members (md's "recover").
	ArrayRecovering
	// ArrayResync: making the copies consistent after an unclean stop, or
	// a user-requested repair (md reports "resync" for repair too).
	ArrayResync
	// ArrayCheck: a user-requested check (read and compare, no writes).
	ArrayCheck
	// ArrayBroken: a raid0 a member's failed write broke (md's array_state
	// "broken"): writes fail until the next assembly, reads go on. Not
	// one of node_md_state's: md exports it in sysfs only.
	ArrayBroken

	numArrayStates
)

var arrayStateNames = [numArrayStates]string{"active", "inactive", "recovering", "resync", "check", "broken"}

// String returns the state's label value.
func (s ArrayState) String() string {
	if s < numArrayStates {
		return arrayStateNames[s]
	}
	return "unknown"
}

// syncing reports whether a sync runs, so that Synced is meaningful.
func (s ArrayState) syncing() bool {
	return s == ArrayRecovering || s == ArrayResync || s == ArrayCheck
}

// MemberState is a member's role and health, exported one-hot as
// ublkraid_member_state{state=...} and counted in ublkraid_disks{state=...}.
type MemberState uint8

// Member states.
const (
	// MemberActive: in sync, in a slot, serving I/O.
	MemberActive MemberState = iota
	// MemberFailed: marked faulty and not yet removed.
	MemberFailed
	// MemberSpare: not in a slot; waits to replace a failed member.
	MemberSpare
	// MemberRebuilding: in a slot, being recovered; not yet in sync. (md
	// has no such disk state: it counts these as neither active nor
	// failed.)
	MemberRebuilding

	numMemberStates
)

var memberStateNames = [numMemberStates]string{"active", "failed", "spare", "rebuilding"}

// String returns the state's label value.
func (s MemberState) String() string {
	if s < numMemberStates {
		return memberStateNames[s]
	}
	return "unknown"
}

// Op is a kind of member operation: the "op" label of ublkraid_member_*.
type Op uint8

// Member operations.
const (
	OpRead Op = iota
	OpWrite
	OpFlush
	OpDiscard

	// NumOps is the number of operation kinds (the length of
	// MemberStats.Ops).
	NumOps
)

var opNames = [NumOps]string{"read", "write", "flush", "discard"}

// String returns the op's label value.
func (o Op) String() string {
	if o < NumOps {
		return opNames[o]
	}
	return "unknown"
}

// MemberStats is a snapshot of one member: its state and its operation
// counters, summed over the array's queues.
type MemberStats struct {
	// Name is the "member" label: the member's device name without /dev/
	// (e.g. "nvme0n1"), or the file's base name for a file member.
	Name  string
	State MemberState
	// Ops is indexed by Op. Every operation the engine issued to the
	// member counts, including those of resync, recovery and check; bitmap
	// block writes count as writes too.
	Ops [NumOps]OpStats
}

// OpStats counts one kind of operation on one member.
type OpStats struct {
	// Ops counts completed operations, failed ones included.
	Ops uint64
	// Bytes counts bytes moved by operations that succeeded (for
	// discards, bytes discarded; flushes have none).
	Bytes uint64
	// Errors counts operations that completed with an error.
	Errors uint64
	// Latency is the time from submission to the member until completion.
	Latency HistogramSnapshot
}

// Add adds o to s (to merge per-queue counters).
func (s *OpStats) Add(o *OpStats) {
	s.Ops += o.Ops
	s.Bytes += o.Bytes
	s.Errors += o.Errors
	s.Latency.Add(&o.Latency)
}

// BitmapStats is a snapshot of an array's write-intent bitmap.
type BitmapStats struct {
	// Regions is the number of regions the bitmap tracks; DirtyRegions
	// the number now dirty (set on disk).
	Regions, DirtyRegions uint64
	// BlockWrites counts bitmap block writes issued to members: one per
	// bitmap block per member per batch (setting and clearing both).
	BlockWrites uint64
	// DataWrites counts data writes to the array that went through the
	// bitmap; Waited counts those that had to wait for a bitmap write
	// (their region was clean), and Wait holds how long they waited.
	DataWrites, Waited uint64
	Wait               HistogramSnapshot
}

// ParityWrite is a kind of stripe write of a raid5/6 array: the "kind"
// label of ublkraid_parity_stripe_writes_total.
type ParityWrite uint8

// Kinds of stripe write.
const (
	// ParityRMW: read-modify-write (old data and parity read).
	ParityRMW ParityWrite = iota
	// ParityRCW: reconstruct-write (the data not written read).
	ParityRCW
	// ParityFull: every data chunk of the rows written, nothing read.
	ParityFull
	// ParityReconstruct: a lost chunk's old data rebuilt first (raid6
	// with two members lost, one of them written).
	ParityReconstruct
	// ParityDataOnly: no parity member left to write.
	ParityDataOnly

	// NumParityWrites is the number of kinds (the length of
	// ParityStats.Writes).
	NumParityWrites
)

var parityWriteNames = [NumParityWrites]string{"rmw", "rcw", "full", "reconstruct", "data_only"}

// String returns the kind's label value.
func (k ParityWrite) String() string {
	if k < NumParityWrites {
		return parityWriteNames[k]
	}
	return "unknown"
}

// ParityStats is a snapshot of a raid5/6 array's parity work, summed over
// its queues. Requests that failed count nowhere.
type ParityStats struct {
	// Writes counts stripe segments (rows of one stripe written together)
	// by kind, indexed by ParityWrite: md's rmw/rcw choice as it was made.
	Writes [NumParityWrites]uint64
	// ReconstructReads counts stripe segments of reads that rebuilt an
	// asked-for chunk from the others (its member lost or unreadable).
	ReconstructReads uint64
	// StripeWaits counts requests that waited for another holding one of
	// their stripes (writes to a stripe are ordered, across queues too).
	StripeWaits uint64
	// DirectReads counts reads served without the stripe lock: every
	// chunk read from its member as it is (md's chunk-aligned reads).
	DirectReads uint64
	// BufferWaits counts requests that waited for stripe buffer memory:
	// their queue's pool was at its bound (md's stripe cache full).
	BufferWaits uint64
	// LogEntries counts write-hole log entries written (one per stripe
	// segment a write changes the parity of); LogWaits the writes that
	// waited for log space; LogCheckpoints the checkpoints written to the
	// members' log headers.
	LogEntries, LogWaits, LogCheckpoints uint64
	// Healed, Unhealed count writes that failed on a member kept as the
	// last copy whose stripes were made consistent again from their log
	// entries, or could not be (their rows may read wrong until written
	// again or resynced).
	Healed, Unhealed uint64
}

// QueueStats is a snapshot of one ublk queue of an array.
type QueueStats struct {
	// ID is the queue number (the "queue" label).
	ID int
	// InFlight is the number of requests fetched from the kernel and not
	// yet completed.
	InFlight int
}
