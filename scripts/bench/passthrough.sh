#!/usr/bin/env bash
# Benchmark (not a test): ublk-raid passthrough vs the raw disk vs a loop
# device with direct I/O, side by side in one VM run, on one virtio disk.
# Prints a markdown table; with -o FILE also writes it there with the command
# and environment. TCG timings are not hardware timings: read the ratios.
#   BENCH_RUNTIME=8 (seconds per job), BENCH_ROUNDS=3 (interleaved rounds; medians)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=
[ "${1:-}" = -o ] && out=$2
go build -o .build/ublk-raid ./cmd/ublk-raid
. scripts/bench/disks.sh
log=$(mktemp)
scripts/vm/run.sh --cpus 2 --mem 2048 "${disk_args[@]}" --disk 2G --env "BENCH_RUNTIME=${BENCH_RUNTIME:-8}" --env "BENCH_ROUNDS=${BENCH_ROUNDS:-3}" \
	-- scripts/bench/passthrough-guest.sh /dev/vda | tee "$log"
if [ -n "$out" ]; then
	{
		echo "# Passthrough benchmark"
		echo
		echo "Command: \`BENCH_DISKS=$disks scripts/bench/passthrough.sh -o $out\` (BENCH_RUNTIME=${BENCH_RUNTIME:-8} s per job after 2 s ramp,"
		echo "BENCH_ROUNDS=${BENCH_ROUNDS:-3} interleaved rounds, medians shown; the last column lists every round's ratio)."
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), in the project's VM: Debian 6.12.95 kernel,"
		echo "qemu TCG, 2 vCPUs, one 2 GiB virtio disk (sparse file; $disk_desc). raw, ublk and loop exist at once and"
		echo "take turns per job. fio (io_uring engine) is pinned to vCPU 1; the ublk server runs one queue (\`-q 1\`,"
		echo "depth 128), its thread pinned to vCPU 0, its ring with DEFER_TASKRUN. TCG timings are not hardware"
		echo "timings: read the ratios. Under TCG every I/O path is CPU-bound, so a queue thread sharing fio's vCPU"
		echo "halves the CPU either gets, while loop's worker threads run on the other vCPU; one queue on vCPU 0 gives"
		echo "ublk the same two vCPUs. The guest idles with HLT (scripts/vm/run.sh: with MWAIT idle, TCG delays"
		echo "cross-CPU wake-ups to the next tick). The 1 MiB rows add"
		echo "the copy between the request and the server's buffer that ublk does on 6.12 (zero copy is masked off in"
		echo "that driver), which TCG emulates slowly; loop with direct I/O copies nothing. Tables before commit 1ac75ce"
		echo "said the server ran a queue per CPU; a bug (GET_QUEUE_AFFINITY asked for queue 0 every time) pinned every"
		echo "queue thread to vCPU 0, so they measured this same placement."
		echo
		sed -n '/^| job/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
