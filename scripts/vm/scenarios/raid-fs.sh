#!/bin/sh
# raid0, raid1 and raid10 n2/f2/o2 over four disks: create, fio verify on
# the raw device, mkfs.ext4 (its stride and stripe width come from the
# device's io_min/io_opt, no -E), mount, files, cold remount, checksums;
# then delete, assemble again from the superblocks alone and check the
# files once more.
set -eu
. scripts/vm/scenarios/lib.sh
DISKS=${RAID_DISKS:-/dev/vdc /dev/vdd /dev/vde /dev/vdf}
mkdir -p /mnt/r
for cfg in 0: 1: 10:n2 10:f2 10:o2; do
	level=${cfg%%:*}
	layout=${cfg#*:}
	name="raid$level${layout:+-$layout}"
	for d in $DISKS; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
	step "$name: create over $DISKS"
	uchunk="--chunk 64K"
	[ "$level" = 1 ] && uchunk= # raid1 has no chunks (refused, as by mdadm)
	# shellcheck disable=SC2086
	start_server "$SCRATCH/$name" run --level "$level" ${layout:+--layout $layout} $uchunk $DISKS
	N=$(echo "$DEV" | tr -dc 0-9)
	step "$name: fio randwrite verify on the raw device"
	fio --name=v --filename="$DEV" --rw=randwrite --bs=8k --iodepth=32 --direct=1 --ioengine=libaio --eta=never \
		--verify_state_save=0 --size=64M --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output="$SCRATCH/$name.fio" || { cat "$SCRATCH/$name.fio"; fail "$name: fio"; }
	[ "$(fio_errors "$SCRATCH/$name.fio")" = 0 ] || fail "$name: fio errors"
	# 4 KiB blocks on every array (mke2fs would give the 511 MiB raid1 1 KiB
	# ones): with zero copy (7.3) a 1 KiB block's page-cache buffer goes to
	# the virtio disk as it is, 1 KiB into a page, and this VM's host
	# O_DIRECT writes of such buffers fail now and then (cache=none; not
	# with cache=writeback, nor with the copy path, whose buffers are
	# page-aligned): an I/O error on every member at once.
	mkfs.ext4 -q -F -b 4096 "$DEV" || fail "mkfs.ext4"
	stride=$(dumpe2fs -h "$DEV" 2>/dev/null | awk -F: '/RAID stride/{gsub(/ /,"",$2); print $2}')
	width=$(dumpe2fs -h "$DEV" 2>/dev/null | awk -F: '/RAID stripe width/{gsub(/ /,"",$2); print $2}')
	case $cfg in
	0:) want="16 64" ;;    # 64 KiB chunk / 4 KiB blocks; 4 data chunks per stripe
	1:) want=" " ;;        # a mirror has no stripe
	10:n2) want="16 32" ;; # 2 data chunks per stripe row
	10:*) want="16 64" ;;  # far/offset: md's io_opt is a chunk per member
	esac
	[ "$stride $width" = "$want" ] || fail "$name: mkfs.ext4 chose stride '$stride' width '$width', want '$want'"
	mount "$DEV" /mnt/r || fail mount
	i=0
	while [ $i -lt 8 ]; do
		head -c 8388608 /dev/urandom >/mnt/r/f$i || fail "write f$i"
		i=$((i + 1))
	done
	(cd /mnt/r && sha256sum f* >"$SCRATCH/$name.sums")
	umount /mnt/r
	echo 3 >/proc/sys/vm/drop_caches
	mount "$DEV" /mnt/r && (cd /mnt/r && sha256sum -c --quiet "$SCRATCH/$name.sums") || fail "$name: checksums differ after remount"
	umount /mnt/r
	del_and_wait "$N"
	step "$name: assemble from superblocks"
	# shellcheck disable=SC2086
	start_server "$SCRATCH/$name-asm" run $DISKS
	grep -q '"created":false' "$SCRATCH/$name-asm.err" || fail "$name: did not assemble"
	mount "$DEV" /mnt/r && (cd /mnt/r && sha256sum -c --quiet "$SCRATCH/$name.sums") || fail "$name: checksums differ after assembly"
	umount /mnt/r
	del_and_wait "$(echo "$DEV" | tr -dc 0-9)"
	assert_no_devices
done
assert_no_kernel_io_errors
echo "raid-fs: ok"
