#!/bin/sh
# Live upgrade: `systemctl restart` of serve, or serve replaced by a new
# binary, three times while fio verify writes to an ext4 mounted on a raid1.
# Each SIGTERM hands the mounted device over: the old daemon's exit aborts
# the requests in flight and the new daemon's recovery reissues them (user
# recovery). fio ends with 0 errors, the files read back, and the kernel
# log has no I/O error.
set -eu
. scripts/vm/scenarios/lib.sh
set -- ${UPGRADE_DISKS:-/dev/vdc /dev/vdd}
A=$1
B=$2
STATE=$SCRATCH/upgrade-state/arrays.json
MNT=/mnt/upgrade
rm -rf "$SCRATCH/upgrade-state"
for d in $A $B; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
dmesg_start=$(dmesg | wc -l)

step "serve, add --level 1 $A $B, ext4, files"
start_serve "$SCRATCH/up0"
DEV=$("$BIN" add --level 1 "$A" "$B") || fail "add"
N=$(echo "$DEV" | tr -dc 0-9)
# (4 KiB blocks: see raid-fs.sh on 1 KiB ones with zero copy in this VM.)
mkfs.ext4 -q -F -b 4096 "$DEV" || fail mkfs.ext4
mkdir -p $MNT
mount "$DEV" $MNT || fail mount
for i in 0 1 2; do head -c 4194304 /dev/urandom >$MNT/f$i || fail "write f$i"; done
sync
(cd $MNT && sha256sum f* >"$SCRATCH/up.sums")

fio --name=upgrade --filename="$MNT/upgrade.fio" --rw=randwrite --bs=8k --iodepth=16 --direct=1 --ioengine=libaio \
	--eta=never --verify_state_save=0 --size=256M --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--output="$SCRATCH/up.fio" &
FIO=$!
sleep 3
kill -0 $FIO 2>/dev/null || { cat "$SCRATCH/up.fio"; fail "fio ended before the first upgrade"; }
# The "new binary": a copy at another path, as a package upgrade leaves it.
cp "$BIN" "$SCRATCH/ublk-raid.new"
r=1
while [ $r -le 3 ]; do
	step "round $r: SIGTERM serve under fio, a new serve resumes $DEV"
	kill -TERM "$SERVER_PID"
	wait "$SERVER_PID" || fail "serve exited $? on SIGTERM"
	grep -q 'leaving it for the next daemon' "$log.err" || { cat "$log.err"; fail "serve did not leave $DEV"; }
	BIN_SAVED=$BIN
	BIN=$SCRATCH/ublk-raid.new
	start_serve "$SCRATCH/up$r"
	BIN=$BIN_SAVED
	grep -q '"recovered":true' "$log.err" || { cat "$log.err"; fail "the new serve did not recover $DEV"; }
	sleep 2
	r=$((r + 1))
done
wait $FIO || { cat "$SCRATCH/up.fio"; fail "fio exited $?"; }
e=$(fio_errors "$SCRATCH/up.fio")
[ "$e" = 0 ] || { cat "$SCRATCH/up.fio"; fail "fio reported $e errors"; }
(cd $MNT && sha256sum -c --quiet "$SCRATCH/up.sums") || fail "files differ"
umount $MNT
echo 3 >/proc/sys/vm/drop_caches
mount "$DEV" $MNT && (cd $MNT && sha256sum -c --quiet "$SCRATCH/up.sums") || fail "files differ after remount"
umount $MNT
[ "$("$BIN" del -n "$N")" = "deleted $DEV" ] || fail "del"
assert_no_devices
if dmesg | tail -n +"$((dmesg_start + 1))" | grep -Ei 'I/O error|Buffer I/O|hung_task|blocked for more than'; then
	fail "kernel log shows I/O errors or hung tasks"
fi
echo "live-upgrade: ok"
