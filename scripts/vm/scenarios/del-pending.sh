#!/bin/sh
# del of an array whose device waits for a recovery that cannot come: serve
# is killed (-9) under a raid1 array, its device left quiesced for the next
# daemon; the next serve cannot start the array (a member's path is gone)
# and keeps it pending. While the device is mounted (read-only, from
# before the kill) `del -n N` is refused and changes nothing: the entry
# stays. Unmounted, with a reader of the device waiting, `del -n N` forgets
# the entry and deletes the device: the reader gets its error instead of
# waiting for good, and no ublk device is left.
set -eu
. scripts/vm/scenarios/lib.sh
set -- ${DP_DISKS:-/dev/vdc /dev/vdd}
A=$1
B=$2
STATE=$SCRATCH/dp-state/arrays.json
rm -rf "$SCRATCH/dp-state"
for d in $A $B; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done

step "serve, add --level 1 $A $B, kill -9 serve"
start_serve "$SCRATCH/dp1"
DEV=$("$BIN" add --level 1 -q 2 "$A" "$B") || fail "add"
N=$(echo "$DEV" | tr -dc 0-9)
dd if=/dev/urandom of="$DEV" bs=1M count=4 oflag=direct 2>/dev/null || fail "write"
mkfs.ext4 -q -F "$DEV" || fail "mkfs.ext4"
MNT=$SCRATCH/dp-mnt
mkdir -p "$MNT"
mount -o ro "$DEV" "$MNT" || fail "mount"
mounted_fail() {
	timeout 20 umount "$MNT" 2>/dev/null
	fail "$@"
}
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
[ -e "/sys/class/ublk-char/ublkc$N" ] || mounted_fail "the killed daemon's device is gone"

step "a new serve cannot start the array ($B's path gone): pending"
sed -i "s#\"$B\"#\"/dev/dp-gone\"#" "$STATE"
grep -q dp-gone "$STATE" || { cat "$STATE"; mounted_fail "state file not edited"; }
start_serve "$SCRATCH/dp2"
# Not started: listed and described inactive (as /proc/mdstat and mdadm
# --detail show an md array that did not run), detail --test exits 2.
"$BIN" detail -n "$N" -o json 2>/dev/null | grep -q '"state": "inactive"' || { "$BIN" list; mounted_fail "the array started, or is not shown inactive"; }
"$BIN" list | grep -q "ublkb$N .*inactive" || { "$BIN" list; mounted_fail "list does not show the array inactive"; }
rc=0
"$BIN" detail -n "$N" --test >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || mounted_fail "detail --test of the inactive array: exit $rc, want 2"

step "del -n $N while $DEV is mounted: refused (exit 1), nothing changes"
cp "$STATE" "$SCRATCH/dp-state.before"
rc=0
out=$("$BIN" del -n "$N" 2>&1) || rc=$?
echo "$out"
[ $rc -eq 1 ] || { mounted_fail "del of a mounted waiting device: exit $rc, want 1: $out"; }
echo "$out" | grep -q "in use" || mounted_fail "del refused without saying why: $out"
cmp -s "$STATE" "$SCRATCH/dp-state.before" || { cat "$STATE"; mounted_fail "the refused del changed the state file"; }
[ -e "/sys/class/ublk-char/ublkc$N" ] || mounted_fail "the refused del deleted the device"
timeout 20 umount "$MNT" || fail "umount of the waiting device"

step "unmounted: a reader of $DEV waits for the recovery"
dd if="$DEV" of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null &
READER=$!
sleep 2
kill -0 $READER 2>/dev/null || fail "the read did not wait for the recovery"

step "del -n $N forgets the entry and deletes the device; the reader ends"
out=$("$BIN" del -n "$N" 2>&1) || { "$BIN" del -n "$N" >/dev/null 2>&1; fail "del: $out"; }
echo "$out"
echo "$out" | grep -q "forgot $DEV" || fail "del did not forget the entry: $out"
echo "$out" | grep -q "deleted $DEV" || { "$BIN" del -n "$N" >/dev/null 2>&1; fail "del left the waiting device: $out"; }
i=0
while kill -0 $READER 2>/dev/null; do
	i=$((i + 1))
	[ $i -gt 100 ] && fail "the reader still waits 10 s after del"
	sleep 0.1
done
wait $READER && fail "the read of the deleted device succeeded"
assert_no_devices
grep -q '"arrays": \[\]' "$STATE" || { cat "$STATE"; fail "the state file still lists the array"; }
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "serve exited $? on SIGTERM"
for d in $A $B; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
echo "del-pending: ok"
