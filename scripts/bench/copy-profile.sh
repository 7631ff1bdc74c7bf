#!/usr/bin/env bash
# Benchmark (not a test): where 1 MiB sequential I/O spends its CPU, md vs
# ublk-raid raid1, on the kernel UBLK_RAID_VM_KERNEL names (6.12, 7.3) and
# the guest CPU model UBLK_RAID_VM_CPU gives (scripts/vm/run.sh); see
# copy-profile-guest.sh. docs/bench/kernel-7.3.md was made with it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
go build -o .build/ublk-raid ./cmd/ublk-raid
. scripts/bench/disks.sh
scripts/vm/run.sh --timeout 900 --cpus 2 --mem 3072 "${disk_args[@]}" \
	--nvme 1G --nvme 1G --nvme 1G --nvme 1G -- scripts/bench/copy-profile-guest.sh
