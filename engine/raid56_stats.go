package engine

import "sync/atomic"

// Kinds of stripe segment write that ParityStats counts (ParityStats.Writes
// index): the plan's ParityWriteMode, with an RCW that reads nothing (the
// whole stripe's data written) counted apart as a full-stripe write.
const (
	ParityStatRMW = iota
	ParityStatRCW
	ParityStatFull
	ParityStatReconstruct
	ParityStatDataOnly
	NumParityStatWrites
)

// ParityStats counts one parity executor's work, for metrics. Only its
// queue's thread adds to it (uncontended atomics, no allocation); anyone
// may read it. Requests that fail count nowhere.
type ParityStats struct {
	// Writes: stripe segments (rows of one stripe planned together) that
	// writes completed, by kind (ParityStat*).
	Writes [NumParityStatWrites]atomic.Uint64
	// ReconstructReads: stripe segments of reads that rebuilt an asked-for
	// chunk from the others (its member lost, failing or read around).
	ReconstructReads atomic.Uint64
	// StripeWaits: requests that waited for another request holding one of
	// their stripes (the stripe lock orders the writes of a stripe across
	// queues, and the reads that reconstruct a chunk).
	StripeWaits atomic.Uint64
	// DirectReads: reads served without the stripe lock (every chunk read
	// from its member as it is).
	DirectReads atomic.Uint64
	// BufferWaits: requests that waited for a stripe buffer, their queue's
	// pool at its bound (raid56_slab.go).
	BufferWaits atomic.Uint64
	// LogEntries: write-hole log entries written; LogWaits: writes that
	// waited for their queue's log ring to be freed by a checkpoint.
	LogEntries, LogWaits atomic.Uint64
	// Healed, Unhealed: writes that failed on a member kept as the last
	// copy whose stripes were made consistent again, or could not be
	// (ErrStripeUnhealed; raid56_heal.go).
	Healed, Unhealed atomic.Uint64
}

// count adds a request that completed well to the counters.
func (st *ParityStats) count(r *parityReq) {
	if r.op == ReqRead && !r.locked {
		st.DirectReads.Add(1)
	}
	for i := range r.segs {
		s := &r.segs[i]
		if r.op == ReqRead {
			if s.missing&s.want != 0 {
				st.ReconstructReads.Add(1)
			}
			continue
		}
		k := ParityStatRCW
		switch s.mode {
		case ParityRMW:
			k = ParityStatRMW
		case ParityRCW:
			if s.reads == 0 {
				k = ParityStatFull
			}
		case ParityReconstruct:
			k = ParityStatReconstruct
		case ParityDataOnly:
			k = ParityStatDataOnly
		}
		st.Writes[k].Add(1)
	}
}
