#!/usr/bin/env bash
# Benchmark (not a test): what one I/O asks of the guest kernel on the path
# a user gets (serve + add with default flags, emulated NVMe members) against
# md with mdadm's defaults, in one VM run on the kernel UBLK_RAID_VM_KERNEL
# names; see events-user-guest.sh. Prints markdown tables; -o FILE also
# writes them with the command.
#   BENCH_RUNTIME=5 (seconds per job), BENCH_ROUNDS=1, BENCH_LEVELS="1 10 0"
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=
[ "${1:-}" = -o ] && out=$2
go build -o .build/ublk-raid ./cmd/ublk-raid
. scripts/bench/disks.sh
log=$(mktemp)
rounds=${BENCH_ROUNDS:-1}
levels=${BENCH_LEVELS:-1 10 0}
scripts/vm/run.sh --timeout $((600 + rounds * 900)) --cpus 2 --mem 3072 "${disk_args[@]}" \
	--nvme 1G --nvme 1G --nvme 1G --nvme 1G \
	--env "BENCH_RUNTIME=${BENCH_RUNTIME:-5}" --env "BENCH_ROUNDS=$rounds" --env "BENCH_LEVELS=$levels" \
	-- scripts/bench/events-user-guest.sh | tee "$log"
if [ -n "$out" ]; then
	{
		echo "Command: \`UBLK_RAID_VM_KERNEL=${UBLK_RAID_VM_KERNEL:-6.12} BENCH_ROUNDS=$rounds BENCH_RUNTIME=${BENCH_RUNTIME:-5} BENCH_LEVELS=\"$levels\" scripts/bench/events-user.sh -o $out\`"
		echo "Run on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), $(grep -m1 'kernel:' "$log" | tr -d '\r' || true)"
		echo
		sed -n '/Queues\|Features/p' "$log" | sed 's/^ */    /' | head -2
		echo
		sed -n '/^raid[0-9]*, no bitmap/,$p' "$log" | tr -d '\r'
	} >"$out"
	echo "wrote $out"
fi
rm -f "$log"
