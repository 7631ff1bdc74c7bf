#!/bin/sh
# raid5 and raid6 through the kernel's ublk driver, as a user runs them
# (`serve` + `add --level 5|6`, default flags but a 64 KiB chunk): fio
# randwrite with crc32c verify on the raw device, mkfs.ext4 (stride and
# stripe width from io_min/io_opt), files and checksums; then members fail
# under fio verify (dm-error under them; raid5 one, raid6 two), fio sees no
# error, a spare takes a failed role and is rebuilt from the parity,
# `check` finds mismatch_cnt 0 and the files read back after a cold
# remount and a re-assembly.
set -eu
. scripts/vm/scenarios/lib.sh
set -- ${RAID_DISKS:-/dev/vdc /dev/vdd /dev/vde /dev/vdf}
STATE=$SCRATCH/r56-state.json
mkdir -p /mnt/r
cleanup() {
	stop_servers
	umount /mnt/r 2>/dev/null || true
	for i in 0 1 2 3; do dmsetup remove "ubr-p$i" 2>/dev/null || true; done
}
trap cleanup EXIT
# wait_healthy N: follows the background jobs until every member is active
# and nothing awaits a resync.
wait_healthy() {
	i=0
	while :; do
		"$BIN" detail -n "$1" --wait >/dev/null 2>&1 || fail "detail --wait"
		"$BIN" detail -n "$1" --test >"$SCRATCH/r56-detail.txt" 2>&1 &&
			! grep -q 'regions await resync' "$SCRATCH/r56-detail.txt" && return 0
		i=$((i + 1))
		[ $i -lt 120 ] || { cat "$SCRATCH/r56-detail.txt"; fail "the array did not become healthy"; }
		sleep 1
	done
}
# check_zero N: runs `check` and wants mismatch_cnt 0.
check_zero() {
	"$BIN" check -n "$1" || fail "check -n $1"
	i=0
	until "$BIN" detail -n "$1" --wait >"$SCRATCH/r56-check.txt" 2>&1 &&
		line=$(grep '^Sync : idle,.* last check' "$SCRATCH/r56-check.txt"); do
		i=$((i + 1))
		[ $i -lt 120 ] || { cat "$SCRATCH/r56-check.txt"; fail "no end of the check"; }
		sleep 1
	done
	echo "$line" | grep -q 'last check: ok, mismatch_cnt 0 ' || fail "check: $line"
}
for level in 5 6; do
	name=raid$level
	step "$name: members under dm linear, a spare"
	i=0
	members=
	for d in "$1" "$2" "$3" "$4"; do
		dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null
		sz=$(blockdev --getsz "$d")
		dmsetup create "ubr-p$i" --table "0 $sz linear $d 0" || fail "dmsetup create"
		members="$members /dev/mapper/ubr-p$i"
		i=$((i + 1))
	done
	# raid5: three members and the fourth disk as a spare; raid6: four.
	spare=
	if [ $level = 5 ]; then
		members="/dev/mapper/ubr-p0 /dev/mapper/ubr-p1 /dev/mapper/ubr-p2"
		spare=/dev/mapper/ubr-p3
	fi
	rm -f "$STATE"
	start_serve "$SCRATCH/$name-serve"
	# shellcheck disable=SC2086
	DEV=$("$BIN" add --level $level --chunk 64K $members) || fail "$name: add --level $level"
	N=$(echo "$DEV" | tr -dc 0-9)
	wait_healthy "$N"
	step "$name: fio randwrite verify on the raw device"
	fio --name=v --filename="$DEV" --rw=randwrite --bs=8k --iodepth=32 --direct=1 --ioengine=libaio --eta=never \
		--verify_state_save=0 --size=64M --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output="$SCRATCH/$name.fio" || { cat "$SCRATCH/$name.fio"; fail "$name: fio"; }
	[ "$(fio_errors "$SCRATCH/$name.fio")" = 0 ] || fail "$name: fio errors"
	step "$name: mkfs.ext4, files"
	mkfs.ext4 -q -F "$DEV" || fail "mkfs.ext4"
	stride=$(dumpe2fs -h "$DEV" 2>/dev/null | awk -F: '/RAID stride/{gsub(/ /,"",$2); print $2}')
	width=$(dumpe2fs -h "$DEV" 2>/dev/null | awk -F: '/RAID stripe width/{gsub(/ /,"",$2); print $2}')
	[ "$stride $width" = "16 32" ] || fail "$name: mkfs.ext4 chose stride '$stride' width '$width', want '16 32' (2 data chunks of 64 KiB)"
	mount "$DEV" /mnt/r || fail mount
	i=0
	while [ $i -lt 6 ]; do
		head -c 8388608 /dev/urandom >/mnt/r/f$i || fail "write f$i"
		i=$((i + 1))
	done
	(cd /mnt/r && sha256sum f* >"$SCRATCH/$name.sums")
	step "$name: members fail under fio verify (a file of the mounted filesystem)"
	fio --name=f --filename=/mnt/r/fio.dat --rw=randwrite --bs=8k --iodepth=16 --direct=1 --ioengine=libaio --eta=never \
		--verify_state_save=0 --size=64M --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--loops=3 --output="$SCRATCH/$name-f.fio" &
	FIO=$!
	sleep 2
	kill -0 $FIO 2>/dev/null || fail "fio ended before the failure was injected"
	lost="0"
	[ $level = 6 ] && lost="0 2"
	for i in $lost; do
		sz=$(blockdev --getsz "/dev/mapper/ubr-p$i")
		dmsetup suspend "ubr-p$i" && dmsetup reload "ubr-p$i" --table "0 $sz error" && dmsetup resume "ubr-p$i" ||
			fail "dm-error swap"
		sleep 1
	done
	wait $FIO || { cat "$SCRATCH/$name-f.fio"; fail "$name: fio failed with members failing"; }
	[ "$(fio_errors "$SCRATCH/$name-f.fio")" = 0 ] || { cat "$SCRATCH/$name-f.fio"; fail "$name: fio errors"; }
	"$BIN" detail -n "$N" >"$SCRATCH/$name-deg.txt" || fail detail
	grep -q 'State : degraded' "$SCRATCH/$name-deg.txt" || { cat "$SCRATCH/$name-deg.txt"; fail "$name: not degraded"; }
	umount /mnt/r
	echo 3 >/proc/sys/vm/drop_caches
	mount "$DEV" /mnt/r && (cd /mnt/r && sha256sum -c --quiet "$SCRATCH/$name.sums") || fail "$name: checksums differ, degraded"
	umount /mnt/r
	step "$name: the failed members' disks come back as spares and are rebuilt"
	for i in $lost; do
		"$BIN" remove -n "$N" "/dev/mapper/ubr-p$i" || fail "remove ubr-p$i"
		dmsetup remove "ubr-p$i" || fail "dmsetup remove"
	done
	# raid5: the spare; raid6: the failed members' own disks, wiped.
	raw=
	if [ $level = 6 ]; then
		for i in $lost; do
			d=$(eval echo "\${$((i + 1))}")
			dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null
			raw="$raw $d"
		done
	fi
	for d in $spare $raw; do "$BIN" add -n "$N" --spare "$d" || fail "add --spare $d"; done
	wait_healthy "$N"
	check_zero "$N"
	echo 3 >/proc/sys/vm/drop_caches
	mount "$DEV" /mnt/r && (cd /mnt/r && sha256sum -c --quiet "$SCRATCH/$name.sums") || fail "$name: checksums differ after the rebuild"
	umount /mnt/r
	step "$name: stop and assemble again"
	"$BIN" del -n "$N" >/dev/null || fail "del"
	kill -TERM "$SERVER_PID"
	wait "$SERVER_PID" || fail "serve exited $?"
	rm -f "$STATE"
	start_serve "$SCRATCH/$name-serve2"
	asm=
	for d in /dev/mapper/ubr-p* $raw; do asm="$asm $d"; done
	# shellcheck disable=SC2086
	DEV=$("$BIN" add $asm) || fail "$name: assemble$asm"
	N=$(echo "$DEV" | tr -dc 0-9)
	mount "$DEV" /mnt/r && (cd /mnt/r && sha256sum -c --quiet "$SCRATCH/$name.sums") || fail "$name: checksums differ after assembly"
	umount /mnt/r
	"$BIN" del -n "$N" >/dev/null || fail "del"
	kill -TERM "$SERVER_PID"
	wait "$SERVER_PID" || fail "serve exited $?"
	for i in 0 1 2 3; do dmsetup remove "ubr-p$i" 2>/dev/null || true; done
	assert_no_devices
done
echo "raid56: ok"
