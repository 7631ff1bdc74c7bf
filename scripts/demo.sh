#!/usr/bin/env bash
# The README's demo: a RAID1 on two disks served by the ublk-raid daemon,
# ext4 on it, some files, `detail`, the metrics, a member failure, re-add
# and check. Where this machine has ublk (/dev/ublk-control after modprobe
# ublk_drv) and DEMO_DISKS="/dev/X /dev/Y" names two disks it may ERASE,
# the demo runs here; otherwise it installs what it needs and runs in the
# project's VM (qemu, two 1 GiB virtual disks).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH=$PATH:/usr/local/go/bin
if [ -n "${DEMO_DISKS:-}" ] && { [ -e /dev/ublk-control ] || modprobe ublk_drv 2>/dev/null; }; then
	go build -o .build/ublk-raid ./cmd/ublk-raid
	# shellcheck disable=SC2086
	exec scripts/vm/demo-guest.sh $DEMO_DISKS
fi
scripts/install-deps.sh
go build -o .build/ublk-raid ./cmd/ublk-raid
exec scripts/vm/run.sh --cpus 2 --disk 1G --disk 1G -- scripts/vm/demo-guest.sh /dev/vda /dev/vdb
