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
"$BIN" run --level 1 --bitmap-region 1M /dev/vda /dev/vdb >/tmp/u.out 2>"$OUT/phase1.log" &
i=0
while [ ! -s /tmp/u.out ]; do
	sleep 0.1
	i=$((i + 1))
	[ $i -lt 600 ] || { cat "$OUT/phase1.log"; exit 1; }
done
dev=$(cat /tmp/u.out)
echo "$dev" >"$OUT/device"
target=$dev
if [ "$MODE" = fs ]; then
	mkfs.ext4 -q "$dev"
	mkdir -p /mnt/a
	mount "$dev" /mnt/a
	target=/mnt/a/data
	# Lay the file out first so the crash finds it allocated.
	fio --name=layout --filename="$target" --size=64M --rw=write --bs=1M --direct=1 --eta=never >/dev/null
	sync
fi
# --trigger-timeout: fio saves its verify state, stops its threads and runs
# the trigger (the power cut) after that many seconds.
cd "$OUT"
fio --name=crash --filename="$target" --size=64M --rw=randwrite --bs=4k --iodepth=16 --direct=1 \
	--ioengine=io_uring --rate_iops=1500 --verify=crc32c --verify_state_save=1 --randseed=42 \
	--trigger-timeout=10 --trigger="$CRASH" --eta=never
echo "phase1: fio ended without the crash" >&2
exit 1
