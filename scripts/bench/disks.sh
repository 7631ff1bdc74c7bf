# shellcheck shell=bash
# shellcheck disable=SC2034 # the sourcing script uses the variables
# Disk backing for the host-side bench scripts (sourced; sets disk_args for
# scripts/vm/run.sh, and disks and disk_desc for the table's header).
# BENCH_DISKS=ram (default): the disk files live in /dev/shm and qemu uses the
# host page cache (cache=writeback), so member I/O costs the host no disk
# time and the ratios measure CPU per I/O, not the host disk's latency
# (which varies run to run). BENCH_DISKS=file: sparse files under .build,
# cache=none (O_DIRECT on the host's disk).
disks=${BENCH_DISKS:-ram}
disk_args=()
case $disks in
ram)
	ddir=$(mktemp -d /dev/shm/ublk-raid-bench.XXXXXX)
	trap 'rm -rf "$ddir"' EXIT
	disk_args=(--disk-dir "$ddir" --disk-opt "cache=writeback,aio=io_uring")
	disk_desc="in /dev/shm, cache=writeback: no host disk time"
	;;
file) disk_desc="on the host's disk, cache=none" ;;
*) echo "BENCH_DISKS must be ram or file" >&2; exit 2 ;;
esac
