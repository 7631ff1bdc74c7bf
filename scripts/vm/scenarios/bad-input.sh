#!/bin/sh
# Bad input at the command line and over the control API: one clear line,
# the right exit code (2 bad usage, 1 refusal), and nothing written to any
# member (bad-lib.sh says which bytes are compared). Foreground commands on
# $1 (default /dev/vda); the daemon's usage errors on /dev/vdc /dev/vdd.
# The refused replace, signature and crafted-superblock cases are
# bad-input-replace.sh, bad-input-signatures.sh and bad-input-crafted.sh.
set -eu
. scripts/vm/scenarios/lib.sh
DISK=${1:-/dev/vda}
. scripts/vm/scenarios/bad-lib.sh

# ---- foreground commands (no daemon)

CASE=passthrough
step "not root"
before=$(dd if="$DISK" bs=1M count=4 iflag=direct 2>/dev/null | sha256sum)
expect 1 "root" setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN" passthrough "$DISK"
step "member missing, too small, in use"
expect 1 "does not exist" "$BIN" passthrough /dev/nonexistent
head -c 65536 /dev/zero >"$SCRATCH/small.img"
expect 1 "too small" "$BIN" passthrough "$SCRATCH/small.img"
mkfs.ext4 -q -F "$DISK"
mkdir -p /mnt/held && mount "$DISK" /mnt/held
expect 1 "in use" "$BIN" passthrough "$DISK"
umount /mnt/held
dd if=/dev/zero of="$DISK" bs=1M count=4 oflag=direct 2>/dev/null
before=$(dd if="$DISK" bs=1M count=4 iflag=direct 2>/dev/null | sha256sum)
step "usage errors"
expect 2 "argument" "$BIN" passthrough
expect 2 "depth" "$BIN" passthrough -d 0 "$DISK"
expect 2 "max-io" "$BIN" passthrough --max-io 3000 "$DISK"
expect 2 "del needs" "$BIN" del
step "driver not loaded"
rmmod ublk_drv || fail "rmmod ublk_drv"
expect 1 "modprobe ublk_drv" "$BIN" passthrough "$DISK"
modprobe ublk_drv || fail "modprobe ublk_drv"
after=$(dd if="$DISK" bs=1M count=4 iflag=direct 2>/dev/null | sha256sum)
[ "$before" = "$after" ] || bad "a refused command changed $DISK"


# ---- the daemon: usage errors exit 2 before any member is touched

bad_serve
reset "$C" "$D"
snap "$C" "$D"
# usage NAME PATTERN ARGS...: `ublk-raid ARGS` exits 2 saying PATTERN,
# creates nothing, writes nothing.
usage() {
	CASE=$1
	pat=$2
	shift 2
	expect 2 "$pat" "$BIN" "$@"
	none_created && unchanged "$C" "$D" >/dev/null || reset "$C" "$D"
}
step "4. sizes that overflow"
usage 4-chunk-overflow "overflow|too large|size|range" add --level 10 --chunk 18014398509481988K "$C" "$D"
usage 4-region-overflow "overflow|too large|size|range" add --level 1 --bitmap-region 18014398509482048K "$C" "$D"
step "6. zero sizes"
usage 6-chunk-0 "chunk" add --level 0 --chunk 0 "$C" "$D"
usage 6-region-0 "bitmap-region|region" add --level 1 --bitmap-region 0 "$C" "$D"
step "7. a name that is not UTF-8"
usage 7-name-utf8 "name" add --level 1 --name "$(printf '\377')" "$C" "$D"
step "10. a member given twice (also via a symlink or /dev/../), a bad name, an unknown command"
ln -sf "$C" "$SCRATCH/member-link"
usage 10-member-twice "twice|same|duplicate|more than once" add --level 1 "$C" "$C"
usage 10-member-symlink "twice|same|duplicate|more than once" add --level 1 "$C" "$SCRATCH/member-link"
usage 10-member-dotdot "twice|same|duplicate|more than once" add --level 1 "$C" "/dev/..$C"
usage 10-name-slash "name" add --level 1 --name a/b "$C" "$D"
usage 10-unknown-command "unknown" frobnicate
CASE=4-6-7-10
unchanged "$C" "$D" || true

step "8. API: trailing garbage after the JSON body -> 400, nothing created"
CASE=8-api-trailing-garbage
code=$(curl -s -o "$SCRATCH/api.txt" -w '%{http_code}' --unix-socket $SOCK -X POST \
	-d "{\"members\":[\"$C\",\"$D\"],\"level\":\"1\"}garbage" http://x/v1/arrays) || true
echo "POST /v1/arrays with trailing garbage: $code $(cat "$SCRATCH/api.txt")"
[ "$code" = 400 ] || bad "POST with trailing garbage answered $code, want 400"
none_created || true
unchanged "$C" "$D" || true

step "12. API: DELETE /v1/version -> 405"
CASE=12-api-method
code=$(curl -s -o "$SCRATCH/api.txt" -w '%{http_code}' --unix-socket $SOCK -X DELETE http://x/v1/version) || true
echo "DELETE /v1/version: $code $(cat "$SCRATCH/api.txt")"
[ "$code" = 405 ] || bad "DELETE /v1/version answered $code, want 405"

step "11. examine of something that is no member: exit 1, a clear line"
CASE=11-examine-dev-null
expect 1 "block device|not a|too small|size|empty|superblock" "$BIN" examine /dev/null
CASE=11-examine-dir
expect 1 "block device|not a|directory" "$BIN" examine /tmp

bad_finish bad-input
