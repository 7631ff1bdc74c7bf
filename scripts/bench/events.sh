#!/usr/bin/env bash
# Benchmark (not a test): what one I/O costs the kernel and the emulated
# disks, md raid0 vs ublk-raid raid0 side by side in one VM run (perf stat:
# virtio kicks, interrupts, io_uring_enter calls, context switches per I/O).
# Prints a markdown table; -o FILE also writes it with the command.
#   BENCH_RUNTIME=6 (seconds per job), BENCH_ROUNDS=3 (rounds; medians)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=
[ "${1:-}" = -o ] && out=$2
go build -o .build/ublk-raid ./cmd/ublk-raid
. scripts/bench/disks.sh
log=$(mktemp)
scripts/vm/run.sh --cpus 2 --mem 2048 "${disk_args[@]}" --disk 1G --disk 1G --disk 1G --disk 1G \
	--env "BENCH_RUNTIME=${BENCH_RUNTIME:-6}" --env "BENCH_ROUNDS=${BENCH_ROUNDS:-3}" -- scripts/bench/events-guest.sh | tee "$log"
if [ -n "$out" ]; then
	{
		echo "# Kernel events per I/O: ublk-raid vs md"
		echo
		echo "Command: \`BENCH_DISKS=$disks BENCH_ROUNDS=${BENCH_ROUNDS:-3} BENCH_RUNTIME=${BENCH_RUNTIME:-6} scripts/bench/events.sh -o $out\`"
		echo "(seconds per job, no ramp; medians of the rounds)."
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), in the project's VM: Debian 6.12.95 kernel,"
		echo "qemu TCG, 2 vCPUs, four 1 GiB virtio disks ($disk_desc). raid0 over the four, 64 KiB chunks: md"
		echo "(mdadm, metadata 1.2) and ublk-raid (\`run -q 1 --no-bitmap --assume-clean\`, one queue pinned to vCPU 0) take turns per job;"
		echo "fio (io_uring engine, 512 MiB range) is pinned to vCPU 1. Counts are of the whole guest during the job"
		echo "(\`perf stat -a\`), divided by the I/Os fio completed: vp_notify is a virtio kick (the guest telling qemu a"
		echo "queue has new requests), irq_handler_entry an interrupt, sys_enter_io_uring_enter counts fio's and the"
		echo "server's io_uring_enter calls, sched_switch context switches. perf stat slows both paths: the IOPS"
		echo "here are not the benchmark's (docs/bench/raid-vs-md.md)."
		echo
		sed -n '/^| job/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
