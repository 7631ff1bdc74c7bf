#!/bin/sh
# kill -9 of the server while fio randrw (crc32c verify) runs on its device;
# `ublk-raid recover` re-attaches; fio must finish with 0 errors and its
# verify must pass. Five times.
set -eu
. scripts/vm/scenarios/lib.sh
DISK=${1:-/dev/vda}
start_server "$SCRATCH/kr" passthrough -q 2 "$DISK"
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
	start_server "$SCRATCH/kr-rec$round" recover -n "$N" -q 2 "$DISK"
	grep -q '"recovered":true' "$SCRATCH/kr-rec$round.err" || fail "recover did not log a recovery"
	wait $FIO || { cat "$SCRATCH/kr$round.txt"; fail "fio exited $? after recovery"; }
	e=$(fio_errors "$SCRATCH/kr$round.txt")
	[ "$e" = 0 ] || { cat "$SCRATCH/kr$round.txt"; fail "fio reported $e errors"; }
	round=$((round + 1))
done
del_and_wait "$N"
assert_no_devices
assert_no_kernel_io_errors
echo "kill-recover: ok (5 rounds)"
