#!/usr/bin/env bash
# Benchmark (not a test): read balancing on a mixed-speed mirror. Two 1 GiB
# virtio disks, the second throttled by qemu (-drive iops=); md raid1, md
# raid10 n2, ublk-raid raid1 and raid10 n2 over the same two disks in one VM
# run, 4k random reads at QD1 and QD32. Prints a markdown table; -o FILE also
# writes it with the command and environment.
#   BENCH_RUNTIME=8 (seconds per job), BENCH_SLOW_IOPS=600 (the slow disk),
#   BENCH_FAST_IOPS= (the fast disk; empty: unthrottled)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=
[ "${1:-}" = -o ] && out=$2
slow=${BENCH_SLOW_IOPS:-600}
fast=${BENCH_FAST_IOPS:-}
go build -o .build/ublk-raid ./cmd/ublk-raid
log=$(mktemp)
scripts/vm/run.sh --cpus 2 --mem 2048 --disk "1G${fast:+,iops=$fast}" --disk "1G,iops=$slow" \
	--env "BENCH_RUNTIME=${BENCH_RUNTIME:-8}" -- scripts/bench/mixed-guest.sh | tee "$log"
if [ -n "$out" ]; then
	{
		echo "# Read balancing on a mixed-speed mirror"
		echo
		echo "Command: \`BENCH_RUNTIME=${BENCH_RUNTIME:-8} BENCH_SLOW_IOPS=$slow${fast:+ BENCH_FAST_IOPS=$fast} scripts/bench/mixed.sh -o $out\`"
		echo "(${BENCH_RUNTIME:-8} s per job after 2 s ramp, one round)."
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), in the project's VM: Debian 6.12.95 kernel,"
		echo "qemu TCG, 2 vCPUs, two 1 GiB virtio disks (sparse files, cache=none, filled first): /dev/vda"
		echo "${fast:+throttled to $fast IOPS}${fast:-unthrottled} (the fast member), /dev/vdb throttled to $slow IOPS by qemu (\`-drive ...,iops=$slow\`)."
		echo "md (mdadm, metadata 1.2, --assume-clean, --bitmap=none; raid10 --layout=n2 --chunk=64) and ublk-raid"
		echo "(\`run -q 1 --chunk 64K\`, one queue pinned to vCPU 0) take turns on the same disks; fio (io_uring,"
		echo "4k randread over 512 MiB) is pinned to vCPU 1. \"reads on fast disk\" is /dev/vda's share of the reads"
		echo "both disks completed during the job (/sys/block/vdX/stat). TCG timings are not hardware timings."
		echo
		sed -n '/^rotational/p' "$log" | tr -d '\r' | sed 's/^/Guest disks: /'
		echo
		sed -n '/^| job/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
