#!/bin/sh
# kill -9 of serve during a rebuild, three times: raid1 over two disks
# (--assume-clean: every region counts as written, so the rebuild copies
# the whole member), data written, `replace` onto a fresh disk behind
# dm-delay (writes wait 100 ms: the rebuild lasts a minute whatever the
# daemon's speed limit, which a restarted daemon does not keep). Each time
# the superblock checkpoint has moved, serve is killed and started again:
# it re-attaches the device (user recovery) and the rebuild resumes at or
# past the checkpoint, never from 0. At the end the new member is active,
# `check` counts 0 mismatches and the data reads back.
set -eu
. scripts/vm/scenarios/lib.sh
set -- ${REBUILD_DISKS:-/dev/vdc /dev/vdd /dev/vde}
A=$1
B=$2
C=$3
SLOW=/dev/mapper/ubr-slow
STATE=$SCRATCH/rk-state/arrays.json
rm -rf "$SCRATCH/rk-state"
for d in $A $B $C; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
dmesg_start=$(dmesg | wc -l)
trap 'stop_servers; "$BIN" del --all >/dev/null 2>&1; dmsetup remove ubr-slow 2>/dev/null || true' EXIT

# checkpoint: role 1's recovery offset (sectors) in $A's superblock.
checkpoint() { "$BIN" examine -o json "$A" | jq '[.roles[] | select(.role == 1) | .recovery_offset_sectors // 0][0]'; }

step "raid1 --assume-clean over $A $B, 3 x 16 MiB of data"
start_serve "$SCRATCH/rk1"
DEV=$("$BIN" add --level 1 --assume-clean --sync-speed-max 8M "$A" "$B") || fail "add"
N=$(echo "$DEV" | tr -dc 0-9)
for off in 0 200 480; do
	head -c $((16 << 20)) /dev/urandom >"$SCRATCH/rk-$off"
	dd if="$SCRATCH/rk-$off" of="$DEV" bs=1M seek=$off oflag=direct 2>/dev/null || fail "write at $off MiB"
done

step "replace $B with $SLOW ($C, writes delayed 100 ms)"
dmsetup create ubr-slow --table "0 $(blockdev --getsz "$C") delay $C 0 0 $C 0 100" || fail "dmsetup create"
"$BIN" replace -n "$N" "$B" --with $SLOW || fail "replace"
prev=0
for k in 1 2 3; do
	i=0
	while :; do
		kill -0 "$SERVER_PID" 2>/dev/null || fail "kill $k: serve died by itself"
		cp=$(checkpoint)
		[ "$cp" -gt "$prev" ] && break
		st=$("$BIN" detail -n "$N" -o json | jq -r '[.sync.action, (.members[] | select(.role == 1) | .state)] | join(" ")')
		case "$st" in rebuild\ rebuilding) ;; *) fail "kill $k: the rebuild is not running ($st) and the checkpoint is still $cp: make it slower" ;; esac
		i=$((i + 1))
		[ $i -gt 240 ] && fail "kill $k: the checkpoint did not move past $prev in 120 s"
		sleep 0.5
	done
	step "kill $k: checkpoint at sector $cp; kill -9 serve, start it again"
	kill -9 "$SERVER_PID"
	wait "$SERVER_PID" 2>/dev/null || true
	start_serve "$SCRATCH/rk$((k + 1))"
	grep -q '"recovered":true' "$log.err" || { cat "$log.err"; fail "serve $((k + 1)) did not recover $DEV"; }
	wait_log "$log.err" "sync started"
	line=$(grep '"msg":"sync started"' "$log.err" | head -1)
	pos=$(echo "$line" | sed -n 's/.*"position_sectors":\([0-9]*\).*/\1/p')
	echo "resumed: $line"
	[ -n "$pos" ] && [ "$pos" -ge "$cp" ] || fail "kill $k: the rebuild restarted at sector ${pos:-?}, below its checkpoint $cp"
	prev=$cp
done

step "the rebuild completes; check finds no mismatch; the data reads back"
"$BIN" detail -n "$N" --wait >"$SCRATCH/rk-detail.txt" || fail "detail --wait"
tail -n 12 "$SCRATCH/rk-detail.txt"
"$BIN" detail -n "$N" -o json | jq -e '.state == "active" and ([.members[] | select(.state == "active")] | length == 2) and (.members[1].path == "'$SLOW'")' >/dev/null ||
	fail "after the rebuild: $("$BIN" detail -n "$N" -o json | jq -c '{state, members}')"
# detail --wait follows the resync the rebuild left pending too, so
# "last" names that one: the rebuild's own end is in serve's log.
ended=$(grep '"msg":"sync ended"' "$log.err" | grep '"action":"rebuild"' | tail -n 1)
[ -n "$ended" ] && ! echo "$ended" | grep -q '"error"' || fail "the rebuild did not end well: ${ended:-no end logged}"
"$BIN" check -n "$N" >/dev/null || fail "check"
"$BIN" detail -n "$N" --wait >"$SCRATCH/rk-detail.txt" || fail "detail --wait"
grep -q 'last check: ok, mismatch_cnt 0' "$SCRATCH/rk-detail.txt" || { cat "$SCRATCH/rk-detail.txt"; fail "check after the rebuild"; }
echo 3 >/proc/sys/vm/drop_caches
for off in 0 200 480; do
	dd if="$DEV" bs=1M skip=$off count=16 iflag=direct 2>/dev/null | cmp -s - "$SCRATCH/rk-$off" || fail "data at $off MiB differs"
done
"$BIN" del -n "$N" >/dev/null || fail "del"
if dmesg | tail -n +$((dmesg_start + 1)) | grep -Ei 'I/O error|blk_update_request|Buffer I/O|hung_task|blocked for more than'; then
	fail "kernel log shows I/O errors or hung tasks"
fi
echo "rebuild-kill: ok"
