#!/usr/bin/env bash
# Runs the tests that need a real ublk kernel: builds the binaries on the
# host, boots the project's VM (scripts/vm/run.sh: the Debian kernel that
# UBLK_RAID_VM_KERNEL names, 6.12 by default or 7.3, under qemu TCG, host
# root shared read-only) and runs scripts/vm/guest-tests.sh in it. Installs
# what it needs on first use (scripts/vm/setup.sh).
#   UBLK_RAID_SCENARIOS="kill-recover"   run only these scenarios ("none": only the Go tests)
#   UBLK_RAID_SKIP_SCENARIOS="raid56"    leave these out
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rm -rf .build/vmtest
mkdir -p .build/vmtest
go build -o .build/ublk-raid ./cmd/ublk-raid
# Every package with VM tests gets a test binary (no -race: TCG is slow).
for pkg in $(grep -l '^func TestVM' --include='*_test.go' -r . | xargs -n1 dirname | sort -u); do
	go test -c -o ".build/vmtest/$(basename "$pkg").test" "$pkg"
done
envs=()
[ -n "${UBLK_RAID_SCENARIOS:-}" ] && envs=(--env "UBLK_RAID_SCENARIOS=$UBLK_RAID_SCENARIOS")
[ -n "${UBLK_RAID_SKIP_SCENARIOS:-}" ] && envs+=(--env "UBLK_RAID_SKIP_SCENARIOS=$UBLK_RAID_SKIP_SCENARIOS")
exec scripts/vm/run.sh --cpus 4 --mem 2048 --disk 2G --disk 1G --disk 512M --disk 512M --disk 512M --disk 512M --timeout 3000 ${envs[@]+"${envs[@]}"} -- scripts/vm/guest-tests.sh
