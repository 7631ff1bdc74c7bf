#!/usr/bin/env bash
# Benchmark (not a test): what a user gets. `serve` + `add` with default
# flags against md with mdadm's defaults, on four emulated NVMe members in
# one VM run (see user-guest.sh for the jobs); further configurations may
# stand beside the default, labelled. Prints markdown tables; -o FILE also
# writes them with the command and the environment.
#   BENCH_CPUS=2 (guest vCPUs), BENCH_RUNTIME=6, BENCH_ROUNDS=3,
#   BENCH_LEVELS="1 10 0", BENCH_BITMAPS="on off", BENCH_JOBS (names),
#   BENCH_CONFIGS: lines LABEL|SERVE-FLAGS|ADD-FLAGS, the first the default
#   ("default||", the default).
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
levels=${BENCH_LEVELS:-1 10 0}
bitmaps=${BENCH_BITMAPS:-on off}
configs=${BENCH_CONFIGS:-default||}
jobs=${BENCH_JOBS:-}
nconf=$(printf '%s\n' "$configs" | grep -c .)
# Per job and configuration about RUNTIME+12 s under TCG (set-up, warm-up).
vm_timeout=$((900 + rounds * 6 * 9 * (nconf + 1) * (runtime + 14)))
scripts/vm/run.sh --timeout "$vm_timeout" --cpus "$cpus" --mem 3072 "${disk_args[@]}" \
	--nvme 1G --nvme 1G --nvme 1G --nvme 1G \
	--env "BENCH_RUNTIME=$runtime" --env "BENCH_ROUNDS=$rounds" --env "BENCH_LEVELS=$levels" \
	--env "BENCH_BITMAPS=$bitmaps" --env "BENCH_CONFIGS=$configs" --env "BENCH_JOBS=$jobs" \
	-- scripts/bench/user-guest.sh | tee "$log"
if [ -n "$out" ]; then
	{
		echo "# What a user gets: ublk-raid (serve + add, default flags) vs md (mdadm defaults)"
		echo
		echo "Command:"
		echo
		echo '```'
		printf 'BENCH_CPUS=%s BENCH_ROUNDS=%s BENCH_RUNTIME=%s BENCH_LEVELS="%s" BENCH_BITMAPS="%s" BENCH_JOBS="%s" \\\n' \
			"$cpus" "$rounds" "$runtime" "$levels" "$bitmaps" "$jobs"
		printf "BENCH_CONFIGS='%s' \\\\\n" "$configs"
		echo "scripts/bench/user.sh -o $out"
		echo '```'
		echo
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), in the project's VM: kernel $(grep -m1 '^kernel:' "$log" | tr -d '\r' | cut -d' ' -f2),"
		echo "qemu TCG, $cpus vCPUs, four 1 GiB emulated NVMe members ($disk_desc), filled first."
		echo "md: mdadm, metadata 1.2, its default chunk (512 KiB) and raid10 layout (n2), --assume-clean, and"
		echo "--bitmap=internal or none said explicitly (mdadm's default for small arrays is none). ublk-raid:"
		echo "\`serve\` with the configuration's flags (\"default\": none), then \`add --level L\` (plus --no-bitmap --assume-clean for"
		echo "bitmap off, and the configuration's add flags). They take turns per job on the same members, each created"
		echo "afresh for it; fio (libaio, direct, 512 MiB range, not pinned) runs $runtime s after a 2 s ramp, write jobs"
		echo "after a pass writing 4 KiB every 4 MiB (the first write to a bitmap region is a one-time cost for both;"
		echo "ublk-raid's sync of the regions it first wrote is waited for)."
		echo "Nx16: one submitter per vCPU. Medians of $rounds rounds; per-round ratios in parentheses."
		echo "TCG timings are not hardware timings: read the ratios."
		echo
		sed -n '/^raid[0-9]*, bitmap/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
