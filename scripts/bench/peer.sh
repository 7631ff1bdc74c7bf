#!/usr/bin/env bash
# Benchmark (not a test): the cost of the ublk path itself, ublk-raid's
# passthrough (default flags) against the raw member and against ublksrv's
# loop target (github.com/ublk-org/ublksrv, the C reference server) over the
# same emulated NVMe namespace, in one VM run on the kernel
# UBLK_RAID_VM_KERNEL names. ublksrv is not packaged by Debian and not
# vendored here: UBLKSRV=/path/to/ublksrv/ublk takes a local build (tag v1.6
# builds with Debian 12's liburing-dev, autoconf, automake, libtool); without
# it those columns are skipped. The VM sees the host's files read-only, so
# the build runs there as built. Prints a markdown table; -o FILE also writes
# it with the command.
#   BENCH_RUNTIME=6 (seconds per job), BENCH_ROUNDS=3
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=
[ "${1:-}" = -o ] && out=$2
go build -o .build/ublk-raid ./cmd/ublk-raid
if [ -n "${UBLKSRV:-}" ]; then
	UBLKSRV=$(realpath "$UBLKSRV")
	[ -x "$UBLKSRV" ] || { echo "UBLKSRV=$UBLKSRV: not an executable" >&2; exit 2; }
fi
. scripts/bench/disks.sh
log=$(mktemp)
rounds=${BENCH_ROUNDS:-3}
runtime=${BENCH_RUNTIME:-6}
scripts/vm/run.sh --timeout $((600 + rounds * 6 * 3 * (runtime + 6))) --cpus 2 --mem 3072 "${disk_args[@]}" \
	--nvme 1G --nvme 1G --nvme 1G --nvme 1G \
	--env "BENCH_RUNTIME=$runtime" --env "BENCH_ROUNDS=$rounds" --env "UBLKSRV=${UBLKSRV:-}" \
	-- scripts/bench/peer-guest.sh | tee "$log"
if [ -n "$out" ]; then
	{
		echo "Command: \`UBLK_RAID_VM_KERNEL=${UBLK_RAID_VM_KERNEL:-6.12} BENCH_ROUNDS=$rounds BENCH_RUNTIME=$runtime UBLKSRV=${UBLKSRV:+/path/to/ublk} scripts/bench/peer.sh -o $out\`"
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), $(grep -m1 'kernel:' "$log" | tr -d '\r' || true)"
		echo
		sed -n '/^| job/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
