#!/bin/sh
# Crash test, first boot (scripts/vm/crash-test.sh): create a raid1 with a
# write-intent bitmap of 1 MiB regions on /dev/vda and /dev/vdb, write to a
# 64 MiB part of it with fio (raw device, or a file on a mounted ext4 when
# MODE=fs), and cut the power mid-run: fio's trigger saves its verify state
# (the writes completed so far) to /mnt/out, then runs crash.sh.
set -eu
MODE=${1:-raw}
BIN=$PWD/.build/ublk-raid
CRASH=$PWD/scripts/vm/crash.sh
OUT=/mnt/out
: >/tmp/u.out
# The server's log is written on the guest's tmpfs (polled below: see
# phase2.sh on polling a file on the 9p share) and copied to $OUT as it
# grows.
LOG=/tmp/phase1.log
"$BIN" run --level 1 --bitmap-region 1M /dev/vda /dev/vdb >/tmp/u.out 2>"$LOG" &
tail -n +1 -f "$LOG" >"$OUT/phase1.log" &
i=0
while [ ! -s /tmp/u.out ]; do
	sleep 0.1
	i=$((i + 1))
	[ $i -lt 600 ] || { cat "$LOG"; exit 1; }
done
dev=$(cat /tmp/u.out)
echo "$dev" >"$OUT/device"
target=$dev
if [ "$MODE" = fs ]; then
	# (Inode tables and journal written now, not by ext4's lazy init
	# in the background during the test.)
	mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
	mkdir -p /mnt/a
	mount "$dev" /mnt/a
	target=/mnt/a/data
	# Lay the file out first so the crash finds it allocated.
	fio --name=layout --filename="$target" --size=64M --rw=write --bs=1M --direct=1 --eta=never >/dev/null
	sync
	# mkfs wrote every region for the first time: each is synced in full
	# before it may be cleared (a new array's copies may differ where
	# nothing was written). Wait for those syncs, as for md's initial
	# sync, so that the crash finds only what fio wrote dirty.
	prev=
	i=0
	while :; do
		# (grep -c exits 1 when it counts 0.)
		cur="$(grep -c '"msg":"sync started"' "$LOG" || :)/$(grep -c '"msg":"sync ended"' "$LOG" || :)"
		[ "${cur%/*}" = "${cur#*/}" ] && [ "$cur" = "$prev" ] && break
		prev=$cur
		i=$((i + 1))
		[ $i -lt 300 ] || { echo "phase1: the first-write syncs did not end ($cur)" >&2; exit 1; }
		sleep 2
	done
	echo "phase1: first-write syncs done ($cur)"
	# Their regions are cleared after the bitmap's clear delay.
	sleep 8
fi
# --trigger-timeout: fio saves its verify state, stops its threads and runs
# the trigger (the power cut) after that many seconds.
cd "$OUT"
fio --name=crash --filename="$target" --size=64M --rw=randwrite --bs=4k --iodepth=16 --direct=1 \
	--ioengine=io_uring --rate_iops=1500 --verify=crc32c --verify_state_save=1 --randseed=42 \
	--trigger-timeout=10 --trigger="$CRASH" --eta=never
echo "phase1: fio ended without the crash" >&2
exit 1
