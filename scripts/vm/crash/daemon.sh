# Shared by the power-cut tests' phases (sourced, after PHASE is set): the
# binary, the record writer, the output directory, and the daemon.
BIN=$PWD/.build/ublk-raid
PCUT=$PWD/scripts/vm/crash/pcut.py
OUT=/mnt/out
STATE=/tmp/ublk-raid-state/arrays.json

fail() {
	echo "$PHASE: FAIL: $*" >&2
	echo "--- tail of the daemon's log:" >&2
	tail -n 30 "$OUT/$PHASE-serve.log" >&2
	exit 1
}

# start_serve: the daemon in the background, up once its socket answers.
start_serve() {
	"$BIN" serve --state-file "$STATE" --metrics-listen '' >/dev/null 2>"$OUT/$PHASE-serve.log" &
	SERVE=$!
	i=0
	until "$BIN" list >/dev/null 2>&1 && grep -q '"serving"' "$OUT/$PHASE-serve.log"; do
		i=$((i + 1))
		kill -0 $SERVE 2>/dev/null && [ $i -lt 600 ] || fail "serve did not come up"
		sleep 0.1
	done
}
