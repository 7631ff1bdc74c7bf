package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace is the prefix of every metric this package exports.
const Namespace = "ublkraid"

// Collector is a prometheus.Collector that turns a Source's snapshots into
// ublk-raid's metrics at scrape time. It keeps no state between scrapes, so
// series of arrays, members and queues that are gone disappear with them.
// It is safe for concurrent use if its Source is.
type Collector struct {
	src Source

	info, state, disks, disksRequired, degraded *prometheus.Desc
	blocks, blocksSynced, syncSpeed             *prometheus.Desc
	readRepairs                                 *prometheus.Desc
	mismatch                                    *prometheus.Desc

	bitmapRegions, bitmapDirty, bitmapWrites *prometheus.Desc
	bitmapDataWrites, bitmapWaited           *prometheus.Desc
	bitmapWait                               *prometheus.Desc

	parityWrites, parityReconstructReads, parityStripeWaits, parityDirectReads, parityBufferWaits *prometheus.Desc
	parityLogEntries, parityLogWaits, parityLogCheckpoints                                        *prometheus.Desc
	parityLastCopyFailures                                                                        *prometheus.Desc

	memberState, memberOps, memberBytes, memberErrors *prometheus.Desc
	memberLatency                                     *prometheus.Desc

	queueInFlight *prometheus.Desc
	ublkFlag      *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector reading src.
func NewCollector(src Source) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
	}
	array := []string{"device"}
	memberOp := []string{"device", "member", "op"}
	return &Collector{
		src: src,

		info: d("info", "Array identity; always 1. Labels: array name, RAID level and layout.",
			"device", "name", "level", "layout"),
		state: d("state", "Activity of the array, one-hot over active, inactive, recovering, resync and check (as node_md_state), and broken (a raid0 whose member failed a write: writes fail until the next assembly).",
			"device", "state"),
		disks: d("disks", "Members of the array by state: active (in sync), failed, spare, rebuilding (as node_md_disks, plus rebuilding).",
			"device", "state"),
		disksRequired: d("disks_required", "Member slots of the array's layout, md's raid_disks (as node_md_disks_required).",
			array...),
		degraded: d("degraded", "Member slots of the array without an in-sync member: missing, failed or rebuilding (as node_md_degraded).",
			array...),
		blocks: d("blocks", "Size of the array in 1 KiB blocks (as node_md_blocks).",
			array...),
		blocksSynced: d("blocks_synced", "1 KiB blocks done by the running resync, recovery or check; equals ublkraid_blocks when none runs (as node_md_blocks_synced).",
			array...),
		syncSpeed: d("sync_speed_bytes_per_second", "Speed of the running resync, recovery or check in bytes per second; 0 when none runs.",
			array...),
		mismatch: d("mismatch_sectors", "Sectors (512 bytes) the running or last check or repair found differing between copies or from the parity, md's mismatch_cnt: 0 when one starts, counting up; kept until the next check or repair.",
			"device"),
		readRepairs: d("read_repairs_total", "Ranges of a copy rewritten from another copy after a read error on it.",
			array...),

		bitmapRegions: d("bitmap_regions", "Regions tracked by the array's write-intent bitmap.",
			array...),
		bitmapDirty: d("bitmap_dirty_regions", "Regions of the write-intent bitmap now dirty.",
			array...),
		bitmapWrites: d("bitmap_writes_total", "Bitmap block writes issued to members: one per bitmap block per member per batch.",
			array...),
		bitmapDataWrites: d("bitmap_data_writes_total", "Data writes to the array that went through the write-intent bitmap.",
			array...),
		bitmapWaited: d("bitmap_data_writes_waited_total", "Data writes that waited for a bitmap write because their region was clean.",
			array...),
		bitmapWait: d("bitmap_wait_seconds", "Time data writes waited for a bitmap write, in seconds.",
			array...),

		parityWrites: d("parity_stripe_writes_total", "Stripe segments (rows of one stripe written together) written by a raid5/6 array, by kind: rmw, rcw, full (nothing read), reconstruct, data_only.",
			"device", "kind"),
		parityReconstructReads: d("parity_reconstruct_reads_total", "Stripe segments of reads that rebuilt an asked-for chunk from the other members.",
			array...),
		parityStripeWaits: d("parity_stripe_waits_total", "Requests that waited for another request holding one of their stripes.",
			array...),
		parityDirectReads: d("parity_direct_reads_total", "Reads served without the stripe lock: every chunk read from its member as it is, nothing reconstructed.",
			array...),
		parityBufferWaits: d("parity_buffer_waits_total", "Requests that waited for stripe buffer memory: their queue's bounded pool was in use by others.",
			array...),
		parityLogEntries: d("parity_log_entries_total", "Write-hole log entries written (one per stripe segment whose parity a write changes).",
			array...),
		parityLogWaits: d("parity_log_waits_total", "Writes that waited for write-hole log space to be freed by a checkpoint.",
			array...),
		parityLogCheckpoints: d("parity_log_checkpoints_total", "Write-hole log checkpoints written to the members' log headers.",
			array...),
		parityLastCopyFailures: d("parity_last_copy_write_failures_total", "Writes that failed on a member kept as the last copy, by result: healed (their stripes' parity made to match the data again from the write-hole log), unhealed (it may not: those rows need rewriting or a repair).",
			"device", "result"),

		memberState: d("member_state", "State of a member, one-hot over active, failed, spare and rebuilding.",
			"device", "member", "state"),
		memberOps: d("member_ops_total", "Operations completed by a member (failed ones included), by op: read, write, flush, discard.",
			memberOp...),
		memberBytes: d("member_bytes_total", "Bytes moved by a member's successful operations, by op: read, write, discard.",
			memberOp...),
		memberErrors: d("member_errors_total", "Operations a member completed with an error, by op.",
			memberOp...),
		memberLatency: d("member_latency_seconds", "Latency of a member's operations from submission to completion, in seconds, by op.",
			memberOp...),

		queueInFlight: d("queue_requests_in_flight", "Requests of a ublk queue fetched from the kernel and not yet completed.",
			"device", "queue"),
		ublkFlag: d("ublk_flag", "A ublk driver feature (UBLK_F_*, lower case) the array's device was created with; always 1.",
			"device", "flag"),
	}
}

// Describe sends the descriptors of every metric the Collector can export.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.info, c.state, c.disks, c.disksRequired, c.degraded,
		c.blocks, c.blocksSynced, c.syncSpeed, c.mismatch, c.readRepairs,
		c.bitmapRegions, c.bitmapDirty, c.bitmapWrites,
		c.bitmapDataWrites, c.bitmapWaited, c.bitmapWait,
		c.parityWrites, c.parityReconstructReads, c.parityStripeWaits, c.parityDirectReads, c.parityBufferWaits,
		c.parityLogEntries, c.parityLogWaits, c.parityLogCheckpoints, c.parityLastCopyFailures,
		c.memberState, c.memberOps, c.memberBytes, c.memberErrors, c.memberLatency,
		c.queueInFlight, c.ublkFlag,
	} {
		ch <- d
	}
}

// Collect reads one snapshot from the Source and sends its metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	arrays := c.src.Snapshot()
	for i := range arrays {
		c.collectArray(ch, &arrays[i])
	}
}

func (c *Collector) collectArray(ch chan<- prometheus.Metric, a *ArrayStats) {
	dev := a.Device
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- constMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- constMetric(d, prometheus.CounterValue, float64(v), labels...)
	}

	gauge(c.info, 1, dev, a.Name, a.Level, a.Layout)
	for s := ArrayState(0); s < numArrayStates; s++ {
		gauge(c.state, oneHot(a.State == s), dev, s.String())
	}

	var byState [numMemberStates]int
	for i := range a.Members {
		if s := a.Members[i].State; s < numMemberStates {
			byState[s]++
		}
	}
	byState[MemberFailed] += a.FailedSlots
	for s := MemberState(0); s < numMemberStates; s++ {
		gauge(c.disks, float64(byState[s]), dev, s.String())
	}
	gauge(c.disksRequired, float64(a.RaidDisks), dev)
	gauge(c.degraded, float64(max(a.RaidDisks-byState[MemberActive], 0)), dev)

	synced := a.Size
	if a.State.syncing() {
		synced = min(a.Synced, a.Size)
	}
	gauge(c.blocks, float64(a.Size)/1024, dev)
	gauge(c.blocksSynced, float64(synced)/1024, dev)
	gauge(c.syncSpeed, a.SyncSpeed, dev)
	gauge(c.mismatch, float64(a.MismatchSectors), dev)
	counter(c.readRepairs, a.ReadRepairs, dev)

	if b := a.Bitmap; b != nil {
		gauge(c.bitmapRegions, float64(b.Regions), dev)
		gauge(c.bitmapDirty, float64(b.DirtyRegions), dev)
		counter(c.bitmapWrites, b.BlockWrites, dev)
		counter(c.bitmapDataWrites, b.DataWrites, dev)
		counter(c.bitmapWaited, b.Waited, dev)
		ch <- constHistogram(c.bitmapWait, &b.Wait, dev)
	}

	if p := a.Parity; p != nil {
		for k := ParityWrite(0); k < NumParityWrites; k++ {
			counter(c.parityWrites, p.Writes[k], dev, k.String())
		}
		counter(c.parityReconstructReads, p.ReconstructReads, dev)
		counter(c.parityStripeWaits, p.StripeWaits, dev)
		counter(c.parityDirectReads, p.DirectReads, dev)
		counter(c.parityBufferWaits, p.BufferWaits, dev)
		counter(c.parityLogEntries, p.LogEntries, dev)
		counter(c.parityLogWaits, p.LogWaits, dev)
		counter(c.parityLogCheckpoints, p.LogCheckpoints, dev)
		counter(c.parityLastCopyFailures, p.Healed, dev, "healed")
		counter(c.parityLastCopyFailures, p.Unhealed, dev, "unhealed")
	}

	for i := range a.Members {
		m := &a.Members[i]
		for s := MemberState(0); s < numMemberStates; s++ {
			gauge(c.memberState, oneHot(m.State == s), dev, m.Name, s.String())
		}
		for op := Op(0); op < NumOps; op++ {
			st := &m.Ops[op]
			name := op.String()
			counter(c.memberOps, st.Ops, dev, m.Name, name)
			if op != OpFlush {
				counter(c.memberBytes, st.Bytes, dev, m.Name, name)
			}
			counter(c.memberErrors, st.Errors, dev, m.Name, name)
			ch <- constHistogram(c.memberLatency, &st.Latency, dev, m.Name, name)
		}
	}

	for _, q := range a.Queues {
		gauge(c.queueInFlight, float64(q.InFlight), dev, strconv.Itoa(q.ID))
	}
	for _, f := range a.UblkFlags {
		gauge(c.ublkFlag, 1, dev, f)
	}
}

func oneHot(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// constMetric is prometheus.NewConstMetric that reports a bad label value
// (invalid UTF-8 from a member name, say) as a scrape error of that one
// series instead of panicking.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// constHistogram converts a snapshot to a Prometheus histogram, with
// cumulative buckets in seconds.
func constHistogram(d *prometheus.Desc, s *HistogramSnapshot, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, NumBuckets-1)
	var cum uint64
	for i, ns := range bucketNanos {
		cum += s.Buckets[i]
		buckets[float64(ns)/1e9] = cum
	}
	count := cum + s.Buckets[NumBuckets-1]
	m, err := prometheus.NewConstHistogram(d, count, float64(s.SumNanos)/1e9, buckets, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// NewRegistry returns a registry with ublk-raid's metrics read from src,
// plus the Go runtime's (go_*) and the process's (process_*) metrics.
func NewRegistry(src Source) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(src),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler returns the HTTP handler for the metrics endpoint (conventionally
// mounted at /metrics). errorLog, if not nil, receives scrape errors (for
// zap, zap.NewStdLog(logger) fits). A bad series does not fail the whole
// scrape: the handler serves what it could gather. At most a few scrapes
// run at once; more get 503, so a scrape storm cannot pile up on the
// daemon.
func Handler(g prometheus.Gatherer, errorLog promhttp.Logger) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:            errorLog,
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})
}
