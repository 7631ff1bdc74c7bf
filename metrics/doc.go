// Package metrics exports ublk-raid's Prometheus metrics.
//
// The array metrics line up with node_exporter's md collector: a dashboard
// or alert written for node_md_state, node_md_disks, node_md_disks_required,
// node_md_degraded, node_md_blocks and node_md_blocks_synced works on
// ublk-raid by replacing the "node_md_" prefix with "ublkraid_" (same
// labels, same units: blocks are 1 KiB, as in /proc/mdstat).
//
// # Threading contract
//
// The I/O path never calls Prometheus. The engine keeps plain atomic
// counters, one set per queue thread, and this package's Histogram and
// OpCounter for latencies: their update methods (Histogram.Observe,
// OpCounter.Done) are a few atomic adds, with no lock, allocation or system
// call, and are safe for any number of concurrent writers (one writer per
// instance is cheapest: no cache line bounces between queue threads).
//
// Everything else runs at scrape time, on the HTTP server's goroutines.
// The Collector calls Source.Snapshot once per scrape; Snapshot reads the
// atomics (Histogram.Snapshot, OpCounter.Snapshot, atomic loads), sums the
// per-queue values (HistogramSnapshot.Add, OpStats.Add) and copies the
// control plane's state into ArrayStats values, which the Collector turns
// into constant metrics. So scrapes cost per scrape, not per I/O, and
// scrapes can run concurrently with each other and with I/O; a snapshot
// taken during I/O is a consistent-enough view (each counter exact when
// read, counters never go backwards), never a torn value.
//
// # Metrics
//
// Array metrics, label device (e.g. "ublkb0"):
//
//	ublkraid_info{device,name,level,layout}       gauge  always 1; array name, raid0|1|10|5|6, layout (n2, f2, o2; left-symmetric...; or "")
//	ublkraid_state{device,state}                  gauge  one-hot over active, inactive, recovering, resync, check
//	ublkraid_disks{device,state}                  gauge  members by state: active, failed, spare, rebuilding
//	ublkraid_disks_required{device}               gauge  member slots of the layout (md raid_disks)
//	ublkraid_degraded{device}                     gauge  slots without an in-sync member (missing, failed, rebuilding)
//	ublkraid_blocks{device}                       gauge  size in 1 KiB blocks
//	ublkraid_blocks_synced{device}                gauge  1 KiB blocks done by the running sync; = blocks when none runs
//	ublkraid_sync_speed_bytes_per_second{device}  gauge  running sync's speed, 0 when none runs
//	ublkraid_mismatch_sectors{device}             gauge  running or last check/repair: sectors that differ (md's mismatch_cnt)
//	ublkraid_read_repairs_total{device}           counter  ranges of a copy rewritten after a read error on it (raid5/6 sync jobs: 4 KiB rows)
//
// Write-intent bitmap metrics, label device, only for arrays with a bitmap:
//
//	ublkraid_bitmap_regions                  gauge      regions tracked
//	ublkraid_bitmap_dirty_regions            gauge      regions now dirty
//	ublkraid_bitmap_writes_total             counter    bitmap block writes issued to members
//	ublkraid_bitmap_data_writes_total        counter    data writes that went through the bitmap
//	ublkraid_bitmap_data_writes_waited_total counter    of those, writes that waited for a bitmap write
//	ublkraid_bitmap_wait_seconds             histogram  how long they waited
//
// Parity metrics, label device, only for raid5/6 arrays:
//
//	ublkraid_parity_stripe_writes_total{device,kind} counter  stripe segments written, by kind: rmw, rcw, full, reconstruct, data_only
//	ublkraid_parity_reconstruct_reads_total          counter  read segments that rebuilt an asked-for chunk from the others
//	ublkraid_parity_stripe_waits_total               counter  requests that waited for another on one of their stripes
//	ublkraid_parity_direct_reads_total               counter  reads served without the stripe lock (nothing reconstructed)
//	ublkraid_parity_buffer_waits_total               counter  requests that waited for stripe buffer memory (the queue's pool at its bound)
//	ublkraid_parity_log_entries_total                counter  write-hole log entries written
//	ublkraid_parity_log_waits_total                  counter  writes that waited for log space
//	ublkraid_parity_log_checkpoints_total            counter  log checkpoints written to the members' headers
//	ublkraid_parity_last_copy_write_failures_total{device,result} counter  writes failed on a member kept as the last copy: healed, unhealed
//
// Member metrics, labels device and member, and op (read, write, flush,
// discard) where shown. The member label is the device's path below /dev
// ("nvme0n1", "mapper/m0"), or its whole path elsewhere: a device keeps
// it whatever else the array holds. The counters are the device's, not
// its role's: a device that takes a role (a replacement, a spare) starts
// from zero, and an operation of a device that has left its role counts
// nowhere. Rebuild, resync, check and repair I/O and the bitmap's block
// writes and flushes count with the requests'; a read or write that moved
// fewer bytes than asked is an error, a discard or write-zeroes (op write)
// the member refused (EOPNOTSUPP, EINVAL: advisory, it fails no member)
// is not:
//
//	ublkraid_member_state{device,member,state}        gauge      one-hot over active, failed, spare, rebuilding
//	ublkraid_member_ops_total{device,member,op}       counter    operations completed (errors included)
//	ublkraid_member_bytes_total{device,member,op}     counter    bytes of successful operations (no flush series)
//	ublkraid_member_errors_total{device,member,op}    counter    operations that failed
//	ublkraid_member_latency_seconds{device,member,op} histogram  submission to completion
//
// Queue metrics, labels device and queue (the queue number):
//
//	ublkraid_queue_requests_in_flight{device,queue} gauge  requests fetched and not yet completed
//
// Histograms have fixed buckets, a 1-2-5 series from 10 µs to 10 s
// (BucketBounds).
//
// NewRegistry adds the Go runtime and process collectors; Handler serves a
// registry over HTTP. Where to listen (127.0.0.1:9999 by default) is the
// daemon's choice.
package metrics
