#!/bin/sh
# Write hole, second boot on the disks of the first: assemble what is left
# (dirty and degraded, it starts without --force: the log replays every
# interrupted write, as md's PPL), lose a member before the
# dirty regions are resynced (MODE healthy5: /dev/vda; healthy6: /dev/vda
# and /dev/vdb), and read back every
# 512-byte sector of the area (pcut.py verify): each holds the last
# acknowledged write that covered it, or the data laid out before, or, for
# the one write in flight at the cut, that write's data. Without the
# write-hole log, a chunk rebuilt from a torn stripe's parity comes back
# as data of no write.
set -eu
MODE=${1:-}
PHASE=phase2
. "$(dirname "$0")/hole-common.sh"
start_serve
speed=""
case $MODE in healthy*) speed="--sync-speed-min 64K --sync-speed-max 64K" ;; esac
# Dirty and (degraded modes) degraded: the write-hole log replays every
# interrupted write (the members missing now were out before the writes),
# so the array starts without --force (md with PPL does too).
if ! dev=$("$BIN" add $speed $PRESENT 2>"$OUT/$PHASE-add.err"); then
	cat "$OUT/$PHASE-add.err"
	fail "add $PRESENT (without --force)"
fi
grep -h 'started dirty and degraded' "$OUT/$PHASE-serve.log" || true
N=$(echo "$dev" | tr -dc 0-9)
grep -h 'write-hole log' "$OUT/$PHASE-serve.log" | tail -n 3 || true
lose=""
case $MODE in
healthy5) lose=/dev/vda ;;
healthy6) lose="/dev/vda /dev/vdb" ;;
esac
for l in $lose; do
	"$BIN" fail -n "$N" "$l" || fail "fail -n $N $l"
done
"$BIN" detail -n "$N" >"$OUT/$PHASE-detail.txt" 2>&1 || true
cat "$OUT/$PHASE-detail.txt"
python3 "$PCUT" verify "$dev" "$LOG" || fail "a sector did not read back as written (the write hole)"
"$BIN" del -n "$N" >/dev/null || fail "del -n $N"
kill -TERM $SERVE
wait $SERVE || fail "serve exited $?"
echo "$PHASE: PASS"
