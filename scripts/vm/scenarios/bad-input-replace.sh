#!/bin/sh
# A refused replace leaves the array as it was: the replacement too small
# (a 256 MiB dm-linear device on $1, default /dev/vda), missing, a member
# of another running array, a disk of another (stopped) array. Each is
# refused with exit 1 in one line; after it `detail` shows every role
# active (none faulty) and no member's bytes changed (bad-lib.sh).
set -eu
. scripts/vm/scenarios/lib.sh
DISK=${1:-/dev/vda}
. scripts/vm/scenarios/bad-lib.sh
SMALL=/dev/mapper/ubr-bad-small
trap 'bad_cleanup; dmsetup remove ubr-bad-small 2>/dev/null || true' EXIT

bad_serve
reset "$BIG" "$C" "$D" "$E"
dmsetup create ubr-bad-small --table "0 $((256 << 11)) linear $DISK $((1 << 21))" || fail "dmsetup create"
[ -b $SMALL ] || fail "$SMALL is not a block device"

step "the reserved area of these disks (superblock, bitmap) ends below 3 MiB - 1 MiB of data"
CASE=reserve
mkarray --level 1 "$BIG" "$C"
for d in "$BIG" "$C"; do
	off=$("$BIN" examine -o json "$d" | jq .data_offset_bytes)
	echo "$d: data offset $off"
	[ "$off" -le $((2 << 20)) ] || bad "$d: data offset $off, bad-lib.sh's first 3 MiB of a blank disk miss the first MiB of data"
done

# fresh_a: a new raid1 A over $C $D, settled (no write pending).
fresh_a() {
	reset "$BIG" "$C" "$D" "$E"
	mkarray --level 1 "$C" "$D"
	A=$N
	sleep 6 # past the bitmap's lazy clear, 5 s after the last write
}

step "1. replace --with a device too small, or missing: refused, the array keeps its member"
CASE=1-replace-too-small
fresh_a
snap "$C" "$D" "$SMALL"
expect 1 "too small|bytes" "$BIN" replace -n "$A" "$D" --with "$SMALL"
healthy "$A"
unchanged || true
CASE=1-replace-nonexistent
fresh_a
snap "$C" "$D"
expect 1 "does not exist|no such" "$BIN" replace -n "$A" "$D" --with /dev/nonexistent
healthy "$A"
unchanged || true

step "2. replace --with a disk of another array, running and stopped: refused"
CASE=2-replace-with-running-member
fresh_a
mkarray --level 1 "$BIG" "$E"
B=$N
sleep 6
snap "$C" "$D" "$E" "$BIG"
expect 1 "in use|member|array" "$BIN" replace -n "$A" "$D" --with "$E"
healthy "$A"
healthy "$B"
unchanged || true
CASE=2-replace-with-stopped-member
fresh_a
mkarray --level 1 "$BIG" "$E"
"$BIN" del -n "$N" >/dev/null || fail "del -n $N"
snap "$C" "$D" "$E" "$BIG"
expect 1 "array|superblock|member" "$BIN" replace -n "$A" "$D" --with "$BIG"
echo "$OUT" | grep -q "$BIG" || bad "the refusal does not name $BIG: $OUT"
healthy "$A"
unchanged || true

bad_finish bad-input-replace
