#!/usr/bin/env bash
# Benchmark (not a test): raid5/6 as the seed ran it (5 NVMe members, 64 KiB
# chunk), ublk-raid (serve + add, default flags, and without the bitmap)
# against md without its bitmap, with it, and tuned as in the seed, in one
# VM run (see raid5-guest.sh). Prints markdown tables; -o FILE also writes
# them with the command and the environment.
#   BENCH_CPUS=2 (guest vCPUs), BENCH_RUNTIME=6, BENCH_ROUNDS=3,
#   BENCH_LEVELS="5", BENCH_JOBS (names)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=
[ "${1:-}" = -o ] && out=$2
go build -o .build/ublk-raid ./cmd/ublk-raid
. scripts/bench/disks.sh
log=$(mktemp)
cpus=${BENCH_CPUS:-2}
rounds=${BENCH_ROUNDS:-3}
runtime=${BENCH_RUNTIME:-6}
levels=${BENCH_LEVELS:-5}
jobs=${BENCH_JOBS:-}
# Per job and configuration about RUNTIME+20 s under TCG (set-up, warm-up).
vm_timeout=$((900 + rounds * 4 * 5 * $(echo "$levels" | wc -w) * (runtime + 25)))
scripts/vm/run.sh --timeout "$vm_timeout" --cpus "$cpus" --mem 3072 "${disk_args[@]}" \
	--nvme 1G --nvme 1G --nvme 1G --nvme 1G --nvme 1G \
	--env "BENCH_RUNTIME=$runtime" --env "BENCH_ROUNDS=$rounds" --env "BENCH_LEVELS=$levels" \
	--env "BENCH_JOBS=$jobs" \
	-- scripts/bench/raid5-guest.sh | tee "$log"
if [ -n "$out" ]; then
	{
		echo "# raid5/6: ublk-raid (serve + add, default flags) vs md, the seed's case in the VM"
		echo
		echo "Command:"
		echo
		echo '```'
		printf 'BENCH_CPUS=%s BENCH_ROUNDS=%s BENCH_RUNTIME=%s BENCH_LEVELS="%s" BENCH_JOBS="%s" scripts/bench/raid5.sh -o %s\n' \
			"$cpus" "$rounds" "$runtime" "$levels" "$jobs" "$out"
		echo '```'
		echo
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), in the project's VM: kernel $(grep -m1 '^kernel:' "$log" | tr -d '\r' | cut -d' ' -f2),"
		echo "qemu TCG, $cpus vCPUs, five 1 GiB emulated NVMe members ($disk_desc), filled first."
		echo "md: mdadm, metadata 1.2, --chunk=64K, --assume-clean (as the seed), --bitmap=none (md-none), internal"
		echo "(md-bitmap, mdadm's bitmap chunk), or none with group_thread_cnt 8 and stripe_cache_size 8192 (md-tuned,"
		echo "the seed's tuning). ublk-raid: \`serve\`, then \`add --level L --chunk 64K\`: the defaults, bitmap on (ublk),"
		echo "or with --no-bitmap --assume-clean (ublk-nobm). Every write of ublk-raid's also writes its write-hole log"
		echo "entry first (docs/raid56.md), in both. They take turns per job on the same members, each created afresh"
		echo "for it; fio (libaio, direct, 512 MiB range, not pinned) runs $runtime s after a 2 s ramp, write jobs after a"
		echo "pass writing 4 KiB every 4 MiB (the first write to a bitmap region is a one-time cost for both)."
		echo "Medians of $rounds rounds; per-round ratios in parentheses. TCG timings are not hardware timings: read the ratios."
		echo
		sed -n '/^raid[0-9]*, 5 members/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
