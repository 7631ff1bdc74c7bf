#!/usr/bin/env bash
# Benchmark (not a test): does the Go runtime's processor count change the
# server's futex calls or its QD1 speed? See gomaxprocs-guest.sh; prints
# one line per job. UBLK_RAID_VM_KERNEL picks the kernel, BENCH_ROUNDS the
# rounds (2). perf in the TCG guest sometimes oopses the guest kernel
# (int3 while patching tracepoints): run.sh then boots again (the lines of
# each attempt are printed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
go build -o .build/ublk-raid ./cmd/ublk-raid
. scripts/bench/disks.sh
scripts/vm/run.sh --timeout 1500 --cpus 2 --mem 3072 "${disk_args[@]}" \
	--nvme 1G --nvme 1G --nvme 1G --nvme 1G --env "BENCH_ROUNDS=${BENCH_ROUNDS:-2}" \
	-- scripts/bench/gomaxprocs-guest.sh
