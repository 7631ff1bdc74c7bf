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
log=$(mktemp)
scripts/vm/run.sh --cpus 2 --mem 2048 --disk 2G --env "BENCH_RUNTIME=${BENCH_RUNTIME:-8}" --env "BENCH_ROUNDS=${BENCH_ROUNDS:-3}" \
	-- scripts/bench/passthrough-guest.sh /dev/vda | tee "$log"
if [ -n "$out" ]; then
	{
		echo "# Passthrough benchmark"
		echo
		echo "Command: \`scripts/bench/passthrough.sh -o $out\` (BENCH_RUNTIME=${BENCH_RUNTIME:-8} s per job after 2 s ramp,"
		echo "BENCH_ROUNDS=${BENCH_ROUNDS:-3} interleaved rounds, medians shown; the last column lists every round's ratio)."
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), in the project's VM: Debian 6.12.95 kernel,"
		echo "qemu TCG, 2 vCPUs, one 2 GiB virtio disk (sparse file, cache=none). raw, ublk and loop exist at once and"
		echo "take turns per job. fio (io_uring engine) is pinned to vCPU 1; the ublk server runs with its defaults:"
		echo "one queue per CPU (2, depth 128), each thread pinned to its CPU, queue rings with DEFER_TASKRUN. TCG"
		echo "timings are not hardware timings: read the ratios. The guest idles with HLT (scripts/vm/run.sh: with MWAIT"
		echo "idle, TCG delays cross-CPU wake-ups to the next tick). With one queue pinned to the other vCPU than fio's"
		echo "(the previous table), ublk reached 0.64x loop at QD32 randread: each request then crosses vCPUs twice"
		echo "(fio -> queue thread -> fio), each an emulated IPI; with a queue per CPU the request stays on fio's vCPU,"
		echo "and DEFER_TASKRUN runs the ring's completions in batches when the queue thread waits. The 1 MiB rows add"
		echo "the copy between the request and the server's buffer that ublk does on 6.12 (zero copy is masked off in"
		echo "that driver), which TCG emulates slowly; loop with direct I/O copies nothing."
		echo
		sed -n '/^| job/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
