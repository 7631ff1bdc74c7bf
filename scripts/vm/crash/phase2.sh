#!/bin/sh
# Crash test, second boot on the disks of the first: assemble the array,
# check that only the dirty regions are resynced and that the copies are
# equal afterwards, verify every write fio completed before the power cut,
# and (MODE=fs) that the file system, its journal replayed, is clean.
set -eu
MODE=${1:-raw}
BIN=$PWD/.build/ublk-raid
OUT=/mnt/out
# The server's log is polled while it is written: it lives on the guest's
# tmpfs and is copied to $OUT at the end. (On the 9p share, a line written
# while a reader polled the file reached the host as zeroes, and the guest
# never saw it: a resync that had ended looked hung.)
LOG=/tmp/phase2.log
trap 'cp "$LOG" "$OUT/phase2.log" 2>/dev/null || :' EXIT
# stuck records where a server that stopped making progress is: each
# thread's kernel stack, then Go's goroutine dump (SIGQUIT, into the log).
stuck() {
	for t in /proc/$U/task/*; do
		echo "== thread ${t##*/}: $(cat "$t/wchan" 2>/dev/null)"
		cat "$t/stack" 2>/dev/null
	done >"$OUT/stacks.log" 2>&1
	kill -QUIT $U 2>/dev/null || :
	sleep 3
	cat "$OUT/stacks.log" >&2
}
fail() {
	echo "phase2: $*" >&2
	cat "$LOG" >&2
	exit 1
}
: >/tmp/u.out
GOTRACEBACK=all "$BIN" run /dev/vda /dev/vdb >/tmp/u.out 2>"$LOG" &
U=$!
i=0
while [ ! -s /tmp/u.out ]; do
	sleep 0.1
	i=$((i + 1))
	[ $i -lt 600 ] || fail "no device"
done
dev=$(cat /tmp/u.out)
line=$(grep '"msg":"bitmap"' "$LOG") || fail "no bitmap line in the log"
regions=$(echo "$line" | sed 's/.*"regions":\([0-9]*\).*/\1/')
dirty=$(echo "$line" | sed 's/.*"dirty_regions":\([0-9]*\).*/\1/')
echo "phase2: assembled $dev: $dirty of $regions regions dirty after the crash"
[ "$dirty" -gt 0 ] || fail "no dirty region after a crash during writes"
[ $((dirty * 8)) -lt "$regions" ] || fail "$dirty of $regions regions dirty: not confined to what fio wrote"
i=0
until grep -q '"msg":"sync ended"' "$LOG"; do
	sleep 0.2
	i=$((i + 1))
	[ $i -lt 1500 ] || { stuck; fail "resync did not end"; }
done
grep '"msg":"sync ended"' "$LOG" | grep -q '"action":"resync"' || fail "no resync ran"
grep '"msg":"sync ended"' "$LOG" | grep -q '"error"' && fail "resync failed"
echo "phase2: resync of the dirty regions done"
target=$dev
if [ "$MODE" = fs ]; then
	# The crash left the journal to replay: until it is, the metadata's
	# home blocks may hold any mix of checkpointed and older versions
	# (e2fsck -n does not replay). Mounting replays it, as for a user.
	mkdir -p /mnt/a
	mount "$dev" /mnt/a || fail "mount (journal replay) failed"
	umount /mnt/a
	e2fsck -fn "$dev" >"$OUT/e2fsck.log" 2>&1 || { cat "$OUT/e2fsck.log"; fail "e2fsck -fn found problems"; }
	echo "phase2: journal replayed, e2fsck -fn clean"
	mount "$dev" /mnt/a # fio's verify opens the file read-write
	target=/mnt/a/data
fi
cd "$OUT"
fio --name=crash --filename="$target" --size=64M --rw=randwrite --bs=4k --iodepth=16 --direct=1 \
	--ioengine=io_uring --verify=crc32c --verify_state_load=1 --verify_only --randseed=42 --eta=never \
	>"$OUT/verify.log" 2>&1 || { cat "$OUT/verify.log"; fail "fio verify of the completed writes failed"; }
grep -q 'err= 0' "$OUT/verify.log" || { cat "$OUT/verify.log"; fail "fio reported errors"; }
echo "phase2: fio verify of the writes completed before the crash: 0 errors"
cd /
if [ "$MODE" = fs ]; then
	umount /mnt/a
	e2fsck -fn "$dev" >"$OUT/e2fsck2.log" 2>&1 || { cat "$OUT/e2fsck2.log"; fail "e2fsck -fn after the verify found problems"; }
fi
"$BIN" del -n "$(echo "$dev" | tr -dc 0-9)" >/dev/null
wait $U || fail "server exit status $?"
off=$("$BIN" examine -o json /dev/vda | sed -n 's/.*"data_offset_bytes": \([0-9]*\).*/\1/p')
len=$("$BIN" examine -o json /dev/vda | sed -n 's/.*"data_bytes": \([0-9]*\).*/\1/p')
cmp -i "$off:$off" -n "$len" /dev/vda /dev/vdb || fail "the copies differ after resync"
echo "phase2: both copies equal ($len bytes)"
