#!/usr/bin/env bash
# Smoke test of the test VM itself; run it inside the guest:
#   scripts/vm/run.sh --disk 1G --disk 1G --nvme 1G -- scripts/vm/smoke.sh
# Checks ublk/md/dm/ext4/fio work in the guest. Exits non-zero on failure.
set -euo pipefail

step() { echo "smoke: $*"; }
fail() {
	echo "smoke: FAIL: $*" >&2
	exit 1
}

[ "${UBLK_RAID_VM:-}" = 1 ] || fail "not inside the test VM (UBLK_RAID_VM != 1)"
step "kernel $(uname -r), $(nproc) cpus, cwd $PWD"

step "ublk"
test -c /dev/ublk-control || fail "/dev/ublk-control missing"

step "modules"
mods=$(lsmod)
for m in ublk_drv raid1 raid456 dm_flakey dm_delay virtio_blk nvme ext4 loop; do
	grep -q "^$m " <<<"$mods" || fail "module $m not loaded"
done
modprobe null_blk nr_devices=1 gb=1 || fail "modprobe null_blk"
test -b /dev/nullb0 || fail "/dev/nullb0 missing after modprobe null_blk"
rmmod null_blk || fail "rmmod null_blk"

step "disks"
for d in vda vdb nvme0n1; do
	test -b "/dev/$d" || fail "/dev/$d missing"
	echo "smoke:   $d: $(($(cat /sys/block/$d/size) / 2048)) MiB, write_cache=$(cat /sys/block/$d/queue/write_cache), serial=$(cat /sys/block/$d/serial 2>/dev/null || cat /sys/block/$d/device/serial)"
done

step "md raid1"
mdadm --create /dev/md0 --run --assume-clean --level=1 --raid-devices=2 \
	--metadata=1.2 /dev/vda /dev/vdb || fail "mdadm --create"
grep -q 'md0 : active raid1' /proc/mdstat || { cat /proc/mdstat; fail "md0 not active"; }
dd if=/dev/urandom of=/dev/md0 bs=1M count=4 oflag=direct status=none || fail "write md0"
mdadm --stop /dev/md0 || fail "mdadm --stop"
mdadm --zero-superblock /dev/vda /dev/vdb || fail "mdadm --zero-superblock"

step "ext4"
mkfs.ext4 -q -F /dev/vda || fail "mkfs.ext4"
mkdir -p /mnt/smoke
mount /dev/vda /mnt/smoke || fail "mount"
dd if=/dev/zero of=/mnt/smoke/f bs=1M count=8 status=none conv=fsync || fail "write file"
[ "$(stat -c %s /mnt/smoke/f)" -eq $((8 << 20)) ] || fail "file size"
umount /mnt/smoke || fail "umount"

step "dm linear"
sectors=$(blockdev --getsz /dev/vdb)
echo "0 $sectors linear /dev/vdb 0" | dmsetup create smoke-lin || fail "dmsetup create"
test -b /dev/mapper/smoke-lin || fail "/dev/mapper/smoke-lin missing"
dd if=/dev/mapper/smoke-lin of=/dev/null bs=1M count=1 iflag=direct status=none || fail "read dm"
dmsetup remove smoke-lin || fail "dmsetup remove"

step "fio"
fio --name=smoke --filename=/dev/nvme0n1 --rw=randread --bs=4k --direct=1 \
	--ioengine=io_uring --iodepth=8 --runtime=2 --time_based --output-format=terse \
	--minimal >/tmp/fio.out || { cat /tmp/fio.out; fail "fio"; }
echo "smoke:   fio randread iops=$(cut -d';' -f8 /tmp/fio.out)"

if mountpoint -q /mnt/out; then
	step "out share"
	echo ok >/mnt/out/smoke.txt || fail "write /mnt/out"
fi

step "PASS"
