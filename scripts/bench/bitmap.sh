#!/usr/bin/env bash
# Benchmark (not a test): what the write-intent bitmap costs, ublk-raid vs
# md, on the same emulated NVMe members (volatile write cache) in one VM
# run. Prints markdown tables; -o FILE also writes them with the command.
#   BENCH_RUNTIME=8 (seconds per job)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=
[ "${1:-}" = -o ] && out=$2
go build -o .build/ublk-raid ./cmd/ublk-raid
log=$(mktemp)
scripts/vm/run.sh --cpus 2 --mem 2048 --nvme 1G --nvme 1G --nvme 1G --nvme 1G \
	--env "BENCH_RUNTIME=${BENCH_RUNTIME:-8}" -- scripts/bench/bitmap-guest.sh | tee "$log"
if [ -n "$out" ]; then
	{
		echo "# Write-intent bitmap cost: ublk-raid vs md"
		echo
		echo "Command: \`scripts/bench/bitmap.sh -o $out\` (BENCH_RUNTIME=${BENCH_RUNTIME:-8} s per job after 2 s ramp, one round)."
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), in the project's VM: Debian 6.12.95 kernel,"
		echo "qemu TCG, 2 vCPUs, four 1 GiB emulated NVMe members (volatile write cache, sparse files), filled first."
		echo "fio 4k randwrite over the whole device (io_uring, pinned to vCPU 1), each job right after a pass writing"
		echo "4 KiB every 4 MiB (steady state: the first write to each region is a one-time cost, counted in"
		echo "\"writes that waited\"); raid1 on two members, raid10 n2"
		echo "(64 KiB chunks) on four. md: mdadm 4.2, metadata 1.2, --assume-clean, --bitmap=internal (mdadm's default"
		echo "chunk) or none. ublk-raid: \`run -q 1 --assume-clean\` with its bitmap (default region size) or --no-bitmap."
		echo "TCG timings are not hardware timings: read the ratios."
		echo
		grep -E '^(md|ublk) .*bitmap' "$log" | tr -d '\r' | sed 's/^/    /'
		echo
		sed -n '/^| level | iodepth/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
