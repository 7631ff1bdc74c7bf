#!/bin/sh
# Power cut during a rebuild, second boot on the disks of the first:
# `serve` + `add` of the members (no --force) assembles the array; the
# rebuild (and any resync) ends; every write acknowledged before the cut
# reads back intact (pcut.py verify); `check` finds mismatch_cnt 0 and the
# array is healthy (detail --test).
set -eu
LEVEL=${1:-}
PHASE=phase2
. "$(dirname "$0")/rebuild-common.sh"
members="$KEPT $NEW"
start_serve
dev=$("$BIN" add $members) || fail "add $members (assemble)"
N=$(echo "$dev" | tr -dc 0-9)
echo "$PHASE: assembled $dev from $members"
"$BIN" detail -n "$N" || fail "detail"
# Follow the background jobs (detail --wait) until the array is healthy,
# every member active and no region awaits a resync. A job may start right
# after another ended (a resync after the rebuild): give up only after 5
# polls in a row found the array idle but not yet in that state.
problems=0
idle=0
while :; do
	"$BIN" detail -n "$N" --wait >"$OUT/$PHASE-wait.txt" 2>&1 || { cat "$OUT/$PHASE-wait.txt"; fail "detail --wait"; }
	ok=1
	"$BIN" detail -n "$N" --test >"$OUT/$PHASE-detail.txt" 2>&1 || ok=0
	grep -q 'regions await resync' "$OUT/$PHASE-detail.txt" && ok=0
	for m in $members; do
		awk -v m="$m" '$3 == m && $2 == "active" { ok = 1 } END { exit !ok }' "$OUT/$PHASE-detail.txt" || ok=0
	done
	[ $ok = 1 ] && break
	grep -q '^Sync : idle' "$OUT/$PHASE-detail.txt" && idle=$((idle + 1))
	if [ $idle -ge 5 ]; then
		cat "$OUT/$PHASE-detail.txt"
		echo "$PHASE: FAIL: the jobs ended but the array is not healthy with every member active and nothing to resync" >&2
		problems=$((problems + 1))
		break
	fi
	sleep 1
done
if [ $problems = 0 ]; then
	cat "$OUT/$PHASE-detail.txt"
	echo "$PHASE: rebuild and resync done, every member active"
fi
# What the array reads must be every acknowledged write, whatever the state.
if python3 "$PCUT" verify "$dev" "$LOG"; then :; else
	echo "$PHASE: FAIL: a write acknowledged before the power cut did not read back" >&2
	problems=$((problems + 1))
fi
"$BIN" check -n "$N" || fail "check -n $N"
# check starts a background job: follow it until detail reports its end.
i=0
until "$BIN" detail -n "$N" --wait >"$OUT/$PHASE-check.txt" 2>&1 &&
	line=$(grep '^Sync : idle,.* last check' "$OUT/$PHASE-check.txt"); do
	i=$((i + 1))
	[ $i -lt 60 ] || { cat "$OUT/$PHASE-check.txt"; fail "no end of the check in detail"; }
	sleep 1
done
echo "$PHASE: $line"
if ! echo "$line" | grep -q 'last check: ok, mismatch_cnt 0 '; then
	echo "$PHASE: FAIL: check did not end ok with mismatch_cnt 0" >&2
	problems=$((problems + 1))
fi
[ $problems = 0 ] || fail "$problems problems (above)"
"$BIN" del -n "$N" >/dev/null || fail "del -n $N"
kill -TERM $SERVE
wait $SERVE || fail "serve exited $?"
echo "$PHASE: PASS"
