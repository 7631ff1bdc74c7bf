#!/usr/bin/env bash
# Benchmark (not a test): ublk-raid vs md on the same virtio disks in one VM
# run: raid0 and raid10 n2 over four disks, raid1 over two, 64 KiB chunks, no
# bitmap; 4k random QD1/QD32 and 1 MiB sequential QD8. Prints a markdown
# table; -o FILE also writes it with the command and environment.
#   BENCH_RUNTIME=8 (seconds per job), BENCH_ROUNDS=3 (rounds; medians)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=
[ "${1:-}" = -o ] && out=$2
go build -o .build/ublk-raid ./cmd/ublk-raid
. scripts/bench/disks.sh
log=$(mktemp)
# A round is 36 fio jobs of RUNTIME+2 s, each after an array set-up: ~8
# min at the default 8 s under TCG; the VM gets about twice that per round
# (run.sh's default timeout, 30 min, ends a 5-round run).
rounds=${BENCH_ROUNDS:-3}
vm_timeout=$((600 + rounds * 120 * (${BENCH_RUNTIME:-8} + 2)))
scripts/vm/run.sh --timeout "$vm_timeout" --cpus 2 --mem 2048 "${disk_args[@]}" --disk 1G --disk 1G --disk 1G --disk 1G \
	--env "BENCH_RUNTIME=${BENCH_RUNTIME:-8}" --env "BENCH_ROUNDS=${BENCH_ROUNDS:-3}" -- scripts/bench/raid-guest.sh | tee "$log"
if [ -n "$out" ]; then
	{
		echo "# ublk-raid vs md"
		echo
		echo "Command: \`BENCH_DISKS=$disks BENCH_ROUNDS=${BENCH_ROUNDS:-3} BENCH_RUNTIME=${BENCH_RUNTIME:-8} scripts/bench/raid.sh -o $out\`"
		echo "(seconds per job after a 2 s ramp; medians shown, the last column lists every round's ratio)."
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), in the project's VM: Debian 6.12.95 kernel,"
		echo "qemu TCG, 2 vCPUs, four 1 GiB virtio disks (sparse files, filled first; $disk_desc). md (mdadm 4.2,"
		echo "metadata 1.2, --assume-clean, --bitmap=none except raid0) and ublk-raid (\`run -q 1 --no-bitmap --assume-clean\`, one queue pinned"
		echo "to vCPU 0, no I/O scheduler on its device) take turns per job, each created afresh on the same disks for it (so the two runs of a job are seconds apart); fio (io_uring engine, 512 MiB range) is pinned to"
		echo "vCPU 1. TCG timings are not hardware timings: read the ratios (see docs/bench/passthrough.md for why"
		echo "ublk pays for cross-vCPU hand-offs under emulation)."
		echo
		sed -n '/^| level/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
