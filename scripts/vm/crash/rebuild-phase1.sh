#!/bin/sh
# Power cut during a rebuild, first boot (scripts/vm/crash-rebuild-test.sh):
# `serve`, `add --level 1|10` with default flags but a slow rebuild
# (--sync-speed-max 1M), lay out 32 MiB of data, put a blank disk in the
# last member's role (METHOD replace: `replace --with`; spare: `fail`,
# `remove`, then `add -n N --spare`, which takes the role), then O_DSYNC
# writes at random offsets (pcut.py write, which records each acknowledged
# write on the LOG disk) while the rebuild runs, and cut the power
# (crash.sh) after a random 3-15 s.
set -eu
LEVEL=${1:-}
METHOD=${2:-replace}
PHASE=phase1
. "$(dirname "$0")/rebuild-common.sh"
BLOCKS=8192 # 32 MiB of 4 KiB blocks
CRASH=$PWD/scripts/vm/crash.sh
nonce=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
delay=$((3 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 13))
echo "$PHASE: $LEVEL, members $MEMBERS, $OLD replaced by $NEW ($METHOD), log on $LOG; nonce $nonce, power cut after ${delay}s of writes"
start_serve
dev=$("$BIN" add --level "${LEVEL#raid}" --sync-speed-max 1M $MEMBERS) || fail "add --level ${LEVEL#raid} $MEMBERS"
N=$(echo "$dev" | tr -dc 0-9)
python3 "$PCUT" fill "$dev" "$LOG" "$nonce" $BLOCKS || fail "pcut fill"
case "$METHOD" in
replace) "$BIN" replace -n "$N" "$OLD" --with "$NEW" || fail "replace -n $N $OLD --with $NEW" ;;
spare)
	"$BIN" fail -n "$N" "$OLD" || fail "fail -n $N $OLD"
	"$BIN" remove -n "$N" "$OLD" || fail "remove -n $N $OLD"
	"$BIN" add -n "$N" --spare "$NEW" || fail "add -n $N --spare $NEW"
	;;
*) fail "METHOD $METHOD: replace or spare" ;;
esac
python3 "$PCUT" write "$dev" "$LOG" 2>"$OUT/$PHASE-writer.log" &
W=$!
sleep "$delay"
"$BIN" detail -n "$N" >"$OUT/$PHASE-detail.txt" 2>&1 || true
cat "$OUT/$PHASE-detail.txt"
kill -0 $W 2>/dev/null || { cat "$OUT/$PHASE-writer.log"; fail "the writer died before the power cut"; }
grep -q rebuilding "$OUT/$PHASE-detail.txt" || fail "no rebuild running at the power cut: the test would not test it"
tail -n 1 "$OUT/$PHASE-writer.log"
exec "$CRASH"
