#!/bin/sh
# kill -9 of the server while fio randrw (crc32c verify) runs on its device;
# a new server re-attaches (user recovery); fio must finish with 0 errors
# and its verify must pass. Five times. With KR_RAID="/dev/vdc /dev/vdd" the
# device is a raid1 array over those disks instead of a passthrough.
set -eu
. scripts/vm/scenarios/lib.sh
DISK=${1:-/dev/vda}
if [ -n "${KR_RAID:-}" ]; then
	for d in $KR_RAID; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
	# shellcheck disable=SC2086
	start_server "$SCRATCH/kr" run --level 1 -q 2 $KR_RAID
else
	start_server "$SCRATCH/kr" passthrough -q 2 "$DISK"
fi
N=$(echo "$DEV" | tr -dc 0-9)
round=1
while [ $round -le 5 ]; do
	step "round $round: fio randrw with verify, kill -9 the server mid-run"
	fio --name=kr --filename="$DEV" --rw=randrw --bs=8k --iodepth=32 --direct=1 \
		--ioengine=libaio --eta=never --verify_state_save=0 --size=160M --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--randseed=$round --output="$SCRATCH/kr$round.txt" &
	FIO=$!
	sleep 2
	kill -0 $FIO 2>/dev/null || fail "fio ended before the kill; make it longer"
	kill -9 "$SERVER_PID"
	wait "$SERVER_PID" 2>/dev/null || true
	if [ -n "${KR_RAID:-}" ]; then
		# shellcheck disable=SC2086
		start_server "$SCRATCH/kr-rec$round" run --recover -n "$N" -q 2 $KR_RAID
	else
		start_server "$SCRATCH/kr-rec$round" recover -n "$N" -q 2 "$DISK"
	fi
	grep -q '"recovered":true' "$SCRATCH/kr-rec$round.err" || fail "recover did not log a recovery"
	wait $FIO || { cat "$SCRATCH/kr$round.txt"; fail "fio exited $? after recovery"; }
	e=$(fio_errors "$SCRATCH/kr$round.txt")
	[ "$e" = 0 ] || { cat "$SCRATCH/kr$round.txt"; fail "fio reported $e errors"; }
	round=$((round + 1))
done
del_and_wait "$N"
assert_no_devices
assert_no_kernel_io_errors
echo "kill-recover${KR_RAID:+ (raid1)}: ok (5 rounds)"
