#!/usr/bin/env bash
# Benchmark (not a test): ublk-raid vs md on the same virtio disks in one VM
# run: raid0 and raid10 n2 over four disks, raid1 over two, 64 KiB chunks, no
# bitmap; 4k random QD1/QD32 and 1 MiB sequential QD8. Prints a markdown
# table; -o FILE also writes it with the command and environment.
#   BENCH_RUNTIME=8 (seconds per job)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=
[ "${1:-}" = -o ] && out=$2
go build -o .build/ublk-raid ./cmd/ublk-raid
log=$(mktemp)
scripts/vm/run.sh --cpus 2 --mem 2048 --disk 1G --disk 1G --disk 1G --disk 1G \
	--env "BENCH_RUNTIME=${BENCH_RUNTIME:-8}" -- scripts/bench/raid-guest.sh | tee "$log"
if [ -n "$out" ]; then
	{
		echo "# ublk-raid vs md"
		echo
		echo "Command: \`scripts/bench/raid.sh -o $out\` (BENCH_RUNTIME=${BENCH_RUNTIME:-8} s per job after 2 s ramp, one round)."
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), in the project's VM: Debian 6.12.95 kernel,"
		echo "qemu TCG, 2 vCPUs, four 1 GiB virtio disks (sparse files, cache=none, filled first). md (mdadm 4.2,"
		echo "metadata 1.2, --assume-clean, --bitmap=none except raid0) and ublk-raid (\`run -q 1 --no-bitmap\`, one queue pinned"
		echo "to vCPU 0) take turns on the same disks per level; fio (io_uring engine, 512 MiB range) is pinned to"
		echo "vCPU 1. TCG timings are not hardware timings: read the ratios (see docs/bench/passthrough.md for why"
		echo "ublk pays for cross-vCPU hand-offs under emulation)."
		echo
		sed -n '/^| level/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
