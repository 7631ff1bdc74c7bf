# Shared by hole-phase1.sh and hole-phase2.sh (sourced): the disks of a
# write-hole round (MODE) and the daemon.
#   healthy5:  raid5 on /dev/vda../dev/vdd, all in; phase 2 fails /dev/vda
#              right after the assembly, before the dirty regions' resync
#   degraded5: raid5 on /dev/vda../dev/vdd, /dev/vdd failed and removed
#              before the writes
#   degraded6: raid6 on /dev/vda../dev/vde, /dev/vdd and /dev/vde failed
#              and removed before the writes
# LOG, a disk outside the array, records every acknowledged write
# (scripts/vm/crash/pcut.py).
BIN=$PWD/.build/ublk-raid
PCUT=$PWD/scripts/vm/crash/pcut.py
OUT=/mnt/out
STATE=/tmp/ublk-raid-state/arrays.json
case "$MODE" in
healthy5) LEVEL=5 MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd" GONE="" LOG=/dev/vde ;;
degraded5) LEVEL=5 MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd" GONE="/dev/vdd" LOG=/dev/vde ;;
degraded6) LEVEL=6 MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde" GONE="/dev/vdd /dev/vde" LOG=/dev/vdf ;;
*)
	echo "usage: $0 healthy5|degraded5|degraded6" >&2
	exit 2
	;;
esac
PRESENT=$MEMBERS
for g in $GONE; do PRESENT=$(echo "$PRESENT" | sed "s|$g||"); done

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
