#!/bin/sh
# A raid1 member fails (dm-error under it) in the middle of fio randwrite
# with crc32c verify: fio sees no error and its verify passes (reads come
# from the survivor); the survivor's superblock records the failure, so a
# later assembly of the survivor alone runs degraded.
set -eu
. scripts/vm/scenarios/lib.sh
set -- ${RAID_DISKS:-/dev/vdc /dev/vdd}
A=$1
B=$2
for d in $A $B; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
sz=$(blockdev --getsz "$A")
dmsetup create ubr-m0 --table "0 $sz linear $A 0" || fail "dmsetup create"
cleanup() {
	stop_servers
	dmsetup remove ubr-m0 2>/dev/null || true
}
trap cleanup EXIT
start_server "$SCRATCH/r1f" run --level 1 /dev/mapper/ubr-m0 "$B"
N=$(echo "$DEV" | tr -dc 0-9)
fio --name=f --filename="$DEV" --rw=randwrite --bs=8k --iodepth=16 --direct=1 --ioengine=libaio --eta=never \
	--verify_state_save=0 --size=96M --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--output="$SCRATCH/r1f.fio" &
FIO=$!
sleep 3
kill -0 $FIO 2>/dev/null || fail "fio ended before the failure was injected"
step "member 0 starts failing every I/O"
dmsetup suspend ubr-m0 && dmsetup reload ubr-m0 --table "0 $sz error" && dmsetup resume ubr-m0 || fail "dm-error swap"
wait $FIO || { cat "$SCRATCH/r1f.fio"; fail "fio failed"; }
[ "$(fio_errors "$SCRATCH/r1f.fio")" = 0 ] || { cat "$SCRATCH/r1f.fio"; fail "fio reported errors"; }
grep -q '"member failed"' "$SCRATCH/r1f.err" || { cat "$SCRATCH/r1f.err"; fail "no 'member failed' log line"; }
del_and_wait "$N"
"$BIN" examine -o json "$B" >"$SCRATCH/r1f-ex.json" || fail "examine $B"
grep -A1 '"role": 0' "$SCRATCH/r1f-ex.json" | grep -q '"state": "faulty"' ||
	{ cat "$SCRATCH/r1f-ex.json"; fail "the survivor's superblock does not record role 0 as faulty"; }
step "assemble again: the survivor says role 0 failed"
start_server "$SCRATCH/r1f-asm" run "$B"
grep -q '"degraded":true' "$SCRATCH/r1f-asm.err" || { cat "$SCRATCH/r1f-asm.err"; fail "assembly is not degraded"; }
fio --name=r --filename="$DEV" --rw=read --bs=1M --direct=1 --size=96M --eta=never --output="$SCRATCH/r1f-r.fio" ||
	fail "reading the degraded array"
del_and_wait "$(echo "$DEV" | tr -dc 0-9)"
assert_no_devices
echo "raid1-fail: ok"
