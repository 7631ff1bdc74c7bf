#!/usr/bin/env bash
# Benchmark (not a test): where a raid5 array's daemon spends its CPU at
# 4 KiB random writes, QD32 (issue 14's row that misses md): ublk-raid
# `run --level 5 --chunk 64K --no-bitmap --assume-clean` on five emulated
# NVMe members, a Go CPU profile of the daemon and a system-wide perf
# profile; see raid5-profile-guest.sh. The Go profile is left in
# OUT (default .build/raid5-profile) as rw32.prof: read it with
# `go tool pprof -top .build/ublk-raid OUT/rw32.prof`.
# docs/bench/raid5.md ("Where the daemon's CPU goes") was made with it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${OUT:-.build/raid5-profile}
mkdir -p "$out"
go build -o .build/ublk-raid ./cmd/ublk-raid
. scripts/bench/disks.sh
scripts/vm/run.sh --timeout 900 --cpus "${BENCH_CPUS:-2}" --mem 3072 "${disk_args[@]}" --out "$out" \
	--nvme 1G --nvme 1G --nvme 1G --nvme 1G --nvme 1G -- scripts/bench/raid5-profile-guest.sh
