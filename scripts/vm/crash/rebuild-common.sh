# Shared by rebuild-phase1.sh and rebuild-phase2.sh (sourced): the disks of
# a LEVEL (raid1 or raid10) round and the daemon.
#   raid1:  members /dev/vda /dev/vdb, NEW /dev/vdc, LOG /dev/vdd
#   raid10: members /dev/vda../dev/vdd, NEW /dev/vde, LOG /dev/vdf
# Phase 1 replaces the last member (OLD) by NEW; LOG, outside the array,
# records every acknowledged write (scripts/vm/crash/pcut.py).
BIN=$PWD/.build/ublk-raid
PCUT=$PWD/scripts/vm/crash/pcut.py
OUT=/mnt/out
STATE=/tmp/ublk-raid-state/arrays.json
case "$LEVEL" in
raid1) MEMBERS="/dev/vda /dev/vdb" NEW=/dev/vdc LOG=/dev/vdd ;;
raid10) MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd" NEW=/dev/vde LOG=/dev/vdf ;;
*)
	echo "usage: $0 raid1|raid10" >&2
	exit 2
	;;
esac
OLD=${MEMBERS##* }
KEPT=${MEMBERS% *}

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
