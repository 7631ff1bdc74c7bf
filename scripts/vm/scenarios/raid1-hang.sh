#!/bin/sh
# A raid1 member stops answering (its dm device suspended: I/O to it
# waits) in the middle of fio randrw with crc32c verify (verify_backlog:
# writes go on to the end, so some reach the hung member). fio runs for a
# fixed time, well past the hang and the timeout: a job of a fixed size
# could end just after the suspend, before any I/O had waited out the
# timeout (seen in CI: fio done, no member failed). With
# --member-timeout 3s the array gives the member up and fails it: fio
# finishes with no error and its verify passes. When the member answers
# again (resume), its late results are dropped, and the device deletes
# cleanly. This is the copy path (--no-zero-copy): with zero copy a request
# waits for every member operation on its pages, given up or not
# (raid1-hang-zc.sh).
set -eu
. scripts/vm/scenarios/lib.sh
set -- ${RAID_DISKS:-/dev/vdc /dev/vdd}
A=$1
B=$2
for d in $A $B; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
sz=$(blockdev --getsz "$A")
dmsetup create ubr-h0 --table "0 $sz linear $A 0" || fail "dmsetup create"
cleanup() {
	dmsetup resume ubr-h0 2>/dev/null || true
	stop_servers
	dmsetup remove ubr-h0 2>/dev/null || true
}
trap cleanup EXIT
# One queue, fio 64 deep: more reads hang on the member than the queue has
# spare buffers (8), so giving them up needs more.
start_server "$SCRATCH/r1h" run --level 1 -q 1 --member-timeout 3s --no-zero-copy /dev/mapper/ubr-h0 "$B"
N=$(echo "$DEV" | tr -dc 0-9)
fio --name=h --filename="$DEV" --rw=randrw --bs=8k --iodepth=64 --direct=1 --ioengine=libaio --eta=never \
	--verify_state_save=0 --size=128M --time_based --runtime=20 --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_backlog=256 \
	--output="$SCRATCH/r1h.fio" &
FIO=$!
sleep 3
kill -0 $FIO 2>/dev/null || fail "fio ended before the hang was injected"
step "member 0 hangs (dm suspend --noflush: its I/O waits)"
dmsetup suspend --noflush ubr-h0 || fail "dmsetup suspend"
wait $FIO || { cat "$SCRATCH/r1h.fio"; fail "fio failed"; }
[ "$(fio_errors "$SCRATCH/r1h.fio")" = 0 ] || { cat "$SCRATCH/r1h.fio"; fail "fio reported errors"; }
grep -q '"member failed"' "$SCRATCH/r1h.err" || { cat "$SCRATCH/r1h.err"; fail "no 'member failed' log line"; }
step "member 0 answers again; its late results are dropped"
dmsetup resume ubr-h0 || fail "dmsetup resume"
fio --name=r --filename="$DEV" --rw=read --bs=1M --direct=1 --size=64M --eta=never --output="$SCRATCH/r1h-r.fio" ||
	fail "reading the degraded array"
del_and_wait "$N"
"$BIN" examine -o json "$B" >"$SCRATCH/r1h-ex.json" || fail "examine $B"
grep -A1 '"role": 0' "$SCRATCH/r1h-ex.json" | grep -q '"state": "faulty"' ||
	{ cat "$SCRATCH/r1h-ex.json"; fail "the survivor's superblock does not record role 0 as faulty"; }
assert_no_devices
echo "raid1-hang: ok"
