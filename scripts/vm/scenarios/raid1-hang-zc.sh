#!/bin/sh
# A raid1 member hangs (dm suspend --noflush) under fio randrw with crc32c
# verify, on a zero-copy device (UBLK_F_AUTO_BUF_REG, 6.16+; skipped where
# the kernel lacks it). With zero copy a request's data is its own pages,
# which the kernel keeps until every member operation on them has
# returned: the member timeout fails the member (later requests leave it
# alone) but the requests whose operations wait on it complete only when
# it answers, as with md. So: after the
# timeout the member is failed, and new I/O goes on without it; when the
# member answers again everything completes, fio finds no error and no
# bad data, and the survivor records the member as faulty.
set -eu
. scripts/vm/scenarios/lib.sh
set -- ${RAID_DISKS:-/dev/vdc /dev/vdd}
A=$1
B=$2
for d in $A $B; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
sz=$(blockdev --getsz "$A")
dmsetup create ubr-z0 --table "0 $sz linear $A 0" || fail "dmsetup create"
cleanup() {
	dmsetup resume ubr-z0 2>/dev/null || true
	stop_servers
	dmsetup remove ubr-z0 2>/dev/null || true
}
trap cleanup EXIT
start_server "$SCRATCH/r1z" run --level 1 -q 1 --member-timeout 3s /dev/mapper/ubr-z0 "$B"
N=$(echo "$DEV" | tr -dc 0-9)
"$BIN" list -o json >"$SCRATCH/r1z-list.json" || fail "list"
if ! grep -q auto_buf_reg "$SCRATCH/r1z-list.json"; then
	echo "raid1-hang-zc: skipped: the kernel offers no zero copy (auto_buf_reg)"
	del_and_wait "$N"
	exit 0
fi
fio --name=z --filename="$DEV" --rw=randrw --bs=8k --iodepth=64 --direct=1 --ioengine=libaio --eta=never \
	--verify_state_save=0 --size=128M --time_based --runtime=12 --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_backlog=256 \
	--output="$SCRATCH/r1z.fio" &
FIO=$!
sleep 3
kill -0 $FIO 2>/dev/null || fail "fio ended before the hang was injected"
step "member 0 hangs (dm suspend --noflush: its I/O waits)"
dmsetup suspend --noflush ubr-z0 || fail "dmsetup suspend"
wait_log "$SCRATCH/r1z.err" "member failed"
step "new I/O goes on without the failed member while old requests wait for it"
dd if="$DEV" of=/dev/null bs=64k count=64 skip=1000 iflag=direct 2>/dev/null || fail "reading the array while the member hangs"
sleep 10
step "member 0 answers again: the requests that waited for it complete"
dmsetup resume ubr-z0 || fail "dmsetup resume"
wait $FIO || { cat "$SCRATCH/r1z.fio"; fail "fio failed"; }
[ "$(fio_errors "$SCRATCH/r1z.fio")" = 0 ] || { cat "$SCRATCH/r1z.fio"; fail "fio reported errors"; }
del_and_wait "$N"
"$BIN" examine -o json "$B" >"$SCRATCH/r1z-ex.json" || fail "examine $B"
grep -A1 '"role": 0' "$SCRATCH/r1z-ex.json" | grep -q '"state": "faulty"' ||
	{ cat "$SCRATCH/r1z-ex.json"; fail "the survivor's superblock does not record role 0 as faulty"; }
assert_no_devices
echo "raid1-hang-zc: ok"
