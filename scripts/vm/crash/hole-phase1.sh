#!/bin/sh
# Write hole, first boot (scripts/vm/crash-hole-test.sh): `serve`, `add
# --level 5|6 --chunk 64K`, lay out 32 MiB of data and let the first
# writes' region syncs end, fail and remove the members MODE takes out,
# then O_DSYNC writes of 1-8 blocks at random offsets (partial stripes:
# the write hole's case) recorded on the LOG disk, and cut the power
# after a random 3-12 s.
set -eu
MODE=${1:-}
PHASE=phase1
. "$(dirname "$0")/hole-common.sh"
BLOCKS=8192 # 32 MiB of 4 KiB blocks
CRASH=$PWD/scripts/vm/crash.sh
nonce=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
delay=$((3 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 10))
echo "$PHASE: $MODE: raid$LEVEL on $MEMBERS, out before the writes: ${GONE:-none}; log on $LOG; nonce $nonce, power cut after ${delay}s of writes"
start_serve
dev=$("$BIN" add --level "$LEVEL" --chunk 64K $MEMBERS) || fail "add --level $LEVEL $MEMBERS"
N=$(echo "$dev" | tr -dc 0-9)
python3 "$PCUT" fill "$dev" "$LOG" "$nonce" $BLOCKS || fail "pcut fill"
# The first writes' region syncs (the parity of never-written regions).
i=0
until "$BIN" detail -n "$N" >"$OUT/$PHASE-detail.txt" 2>&1 && grep -q '^Sync : idle' "$OUT/$PHASE-detail.txt"; do
	i=$((i + 1))
	[ $i -lt 300 ] || { cat "$OUT/$PHASE-detail.txt"; fail "the first writes' syncs did not end"; }
	sleep 1
done
for g in $GONE; do
	"$BIN" fail -n "$N" "$g" || fail "fail -n $N $g"
	"$BIN" remove -n "$N" "$g" || fail "remove -n $N $g"
done
python3 "$PCUT" write "$dev" "$LOG" 2>"$OUT/$PHASE-writer.log" &
W=$!
sleep "$delay"
"$BIN" detail -n "$N" >"$OUT/$PHASE-detail.txt" 2>&1 || true
cat "$OUT/$PHASE-detail.txt"
kill -0 $W 2>/dev/null || { cat "$OUT/$PHASE-writer.log"; fail "the writer died before the power cut"; }
tail -n 1 "$OUT/$PHASE-writer.log"
exec "$CRASH"
