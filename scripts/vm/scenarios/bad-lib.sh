# Shared helpers of the bad-input scenarios (sourced after lib.sh): refused
# commands must exit with the right code, print one clear line and leave
# every member's bytes as they were. The compared areas of a member: the
# reserved area (superblock + bitmap) and the first MiB of data, i.e.
# [0, data offset + 1 MiB) - engine.Reserve gives a data offset of 2 MiB on
# the 512 MiB and 1 GiB disks of the VM, bad-input-replace.sh checks that -
# or the first 3 MiB when there is no superblock (every signature these
# scenarios write lives there), the last MiB of the data area, and the last
# MiB of the device (md 1.0 and GPT backups). Every case runs to its end;
# bad_finish lists the failed ones.
# Disks: /dev/vdb (1 GiB, free once the Go tests ran), /dev/vdc../dev/vdf
# (512 MiB); BAD_BIG and BAD_DISKS override.
BIG=${BAD_BIG:-/dev/vdb}
# shellcheck disable=SC2086
set -- ${BAD_DISKS:-/dev/vdc /dev/vdd /dev/vde /dev/vdf}
C=$1
D=$2
E=$3
F=$4
HERE=scripts/vm/scenarios
SOCK=/run/ublk-raid/control.sock
STATE=$SCRATCH/bad-state/arrays.json
FAILED=""
CASE=setup

# bad MSG: records a failure of the current case and goes on.
bad() {
	echo "FAIL [$CASE]: $*" >&2
	case " $FAILED " in *" $CASE "*) ;; *) FAILED="$FAILED $CASE" ;; esac
}

# expect CODE PATTERN CMD...: CMD must exit CODE and print exactly one line
# matching the extended regexp PATTERN (case-insensitive), not a bare errno
# text ("invalid argument"). OUT is what it printed.
expect() {
	code=$1
	pat=$2
	shift 2
	set +e
	OUT=$("$@" 2>&1)
	rc=$?
	set -e
	ok=1
	[ "$rc" = "$code" ] || { bad "'$*' exited $rc, want $code: $OUT"; ok=0; }
	echo "$OUT" | grep -Eqi -- "$pat" || { bad "'$*' said '$OUT', want /$pat/"; ok=0; }
	[ "$(echo "$OUT" | wc -l)" = 1 ] || { bad "'$*' printed more than one line: $OUT"; ok=0; }
	if echo "$OUT" | grep -qi 'invalid argument'; then
		bad "'$*' said '$OUT': a bare errno, not what is wrong"
		ok=0
	fi
	[ $ok = 0 ] || echo "ok: $* -> $OUT"
}

# u64 DEV OFFSET: the little-endian 64-bit integer at byte OFFSET of DEV.
u64() {
	dd if="$1" bs=4096 skip=$(($2 / 4096)) count=1 iflag=direct 2>/dev/null |
		od -An -tu8 -j $(($2 % 4096)) -N8 | tr -d ' '
}

# ranges DEV: "OFFSET LENGTH" lines (bytes) of the areas compared (above).
ranges() {
	size=$(blockdev --getsize64 "$1")
	magic=$(dd if="$1" bs=4096 skip=1 count=1 iflag=direct 2>/dev/null | head -c 8)
	start=$((3 << 20))
	if [ "$magic" = ublkraid ]; then
		off=$(u64 "$1" $((4096 + 104)))
		len=$(($(u64 "$1" $((4096 + 112))) * 512))
		if [ "$off" -le $((size - (1 << 20))) ] && [ "$len" -le $((size - off)) ] && [ "$len" -ge $((1 << 20)) ]; then
			start=$((off + (1 << 20)))
			echo "$((off + len - (1 << 20))) $((1 << 20))"
		fi
	fi
	echo "0 $start"
	echo "$((size - (1 << 20))) $((1 << 20))"
}

# sums DEV RANGES_FILE: one checksum line per range.
sums() {
	while read -r o l; do
		echo "$o+$l $(dd if="$1" bs=1M iflag=direct,skip_bytes,count_bytes skip="$o" count="$l" 2>/dev/null | md5sum | cut -c1-16)"
	done <"$2"
}

# snap DEV...: records the bytes of DEV... (before a refused command).
snap() {
	SNAPPED="$*"
	for d in "$@"; do
		f=$SCRATCH/snap$(echo "$d" | tr / _)
		ranges "$d" >"$f.ranges"
		sums "$d" "$f.ranges" >"$f.sums"
	done
}

# unchanged [DEV...]: the devices snapped last (or DEV...) read as before;
# returns 1 if one changed.
unchanged() {
	[ $# -gt 0 ] || set -- $SNAPPED
	same=0
	for d in "$@"; do
		f=$SCRATCH/snap$(echo "$d" | tr / _)
		sums "$d" "$f.ranges" >"$f.now"
		if cmp -s "$f.sums" "$f.now"; then
			echo "ok: $d unchanged ($(wc -l <"$f.sums") ranges)"
		else
			bad "$d changed: $(diff "$f.sums" "$f.now" | grep '^>' | tr '\n' ' ')"
			same=1
		fi
	done
	return $same
}

# wipe DEV...: zeroes the first and last 8 MiB (every signature used here).
wipe() {
	for d in "$@"; do
		size=$(blockdev --getsize64 "$d") || continue
		dd if=/dev/zero of="$d" bs=1M count=8 oflag=direct 2>/dev/null || true
		dd if=/dev/zero of="$d" bs=1M count=8 seek=$((size / 1048576 - 8)) oflag=direct 2>/dev/null || true
	done
}

bad_serve() {
	rm -rf "$SCRATCH/bad-state"
	start_serve "$SCRATCH/bad-serve"
}

# mkarray ARGS...: `add ARGS` must succeed; N is the array's number (from
# the device path on stdout; warnings, such as unused space, go to stderr).
mkarray() {
	out=$("$BIN" add "$@" 2>"$SCRATCH/mkarray.err") || fail "add $*: $out $(cat "$SCRATCH/mkarray.err")"
	N=${out#/dev/ublkb}
	[ -b "/dev/ublkb$N" ] || fail "add $* printed '$out' $(cat "$SCRATCH/mkarray.err")"
}

# narrays: the number of arrays the daemon serves.
narrays() { "$BIN" list -o json | jq '.arrays | length'; }

# none_created: no array was created (if one was: a failure, deleted).
none_created() {
	n=$(narrays)
	[ "$n" = 0 ] && return 0
	bad "an array was created: $("$BIN" list | tr -s ' \n' ' ')"
	"$BIN" del --all >/dev/null 2>&1 || true
	return 1
}

# reset DEV...: deletes every array, wipes DEV....
reset() {
	"$BIN" del --all >/dev/null 2>&1 || true
	wipe "$@"
}

# healthy N: array N has every role active, none faulty or missing.
healthy() {
	j=$("$BIN" detail -n "$1" -o json) || { bad "detail -n $1 failed"; return; }
	if echo "$j" | jq -e '.state == "active" and (.degraded | not) and .active_disks == .raid_disks and ([.members[] | select(.state != "active")] | length == 0)' >/dev/null; then
		echo "ok: array $1 healthy: $(echo "$j" | jq -c '[.members[] | [.role, .state, .path]]')"
	else
		bad "array $1 is not healthy after a refused command: $(echo "$j" | jq -c '{state, active_disks, failed_disks, members}')"
	fi
}

bad_cleanup() {
	"$BIN" del --all >/dev/null 2>&1 || true
	stop_servers
	wipe "$BIG" "$C" "$D" "$E" "$F"
}
trap bad_cleanup EXIT

# bad_finish NAME: lists the failed cases and exits 1, or says ok.
bad_finish() {
	if [ -n "$FAILED" ]; then
		echo "$1: failed cases:$FAILED"
		exit 1
	fi
	echo "$1: ok"
}
