#!/bin/sh
# Passthrough over a disk with 1, 2 and 4 queues: mkfs.ext4, mount, 200 MiB
# of random files, remount with cold caches, sha256 of every file; then fio
# randwrite with crc32c verify over the raw device; del refuses the mounted
# device and, once unmounted, leaves no device.
set -eu
. scripts/vm/scenarios/lib.sh
DISK=${1:-/dev/vda}
mkdir -p /mnt/pt
for q in 1 2 4; do
	step "queues=$q: create over $DISK"
	start_server "$SCRATCH/pt$q" passthrough -q "$q" "$DISK"
	n=$(ls /sys/block/"$(basename "$DEV")"/mq | wc -l)
	[ "$n" = "$q" ] || fail "$DEV has $n hardware queues, asked for $q"
	mkfs.ext4 -q -F "$DEV" || fail "mkfs.ext4"
	mount "$DEV" /mnt/pt || fail mount
	i=0
	while [ $i -lt 20 ]; do
		head -c 10485760 /dev/urandom >/mnt/pt/f$i || fail "write f$i"
		i=$((i + 1))
	done
	(cd /mnt/pt && sha256sum f* >"$SCRATCH/sums") || fail sha256sum
	umount /mnt/pt || fail umount
	echo 3 >/proc/sys/vm/drop_caches
	mount "$DEV" /mnt/pt || fail "remount"
	(cd /mnt/pt && sha256sum -c --quiet "$SCRATCH/sums") || fail "checksums differ after remount"
	if [ "$q" = 1 ]; then
		step "queues=$q: del of the mounted device is refused; it keeps serving"
		out=$("$BIN" del -n "$(echo "$DEV" | tr -dc 0-9)" 2>&1) && fail "del of a mounted passthrough succeeded: $out"
		echo "$out" | grep -q "in use" || fail "del said: $out"
		kill -0 "$SERVER_PID" 2>/dev/null || fail "the server exited after the refused del"
		(cd /mnt/pt && sha256sum -c --quiet "$SCRATCH/sums") || fail "checksums differ after the refused del"
	fi
	umount /mnt/pt || fail umount
	step "queues=$q: fio randwrite 8k QD32 verify=crc32c"
	fio --name=verify --filename="$DEV" --rw=randwrite --bs=8k --iodepth=32 --direct=1 \
		--ioengine=libaio --eta=never --verify_state_save=0 --size=256M --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output="$SCRATCH/fio$q.txt" || { cat "$SCRATCH/fio$q.txt"; fail "fio exited $?"; }
	e=$(fio_errors "$SCRATCH/fio$q.txt")
	[ "$e" = 0 ] || fail "fio reported $e errors"
	step "queues=$q: del"
	del_and_wait "$(echo "$DEV" | tr -dc 0-9)"
	assert_no_devices
done
assert_no_kernel_io_errors
echo "passthrough-fs: ok"
