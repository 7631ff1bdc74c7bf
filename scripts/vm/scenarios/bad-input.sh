#!/bin/sh
# Bad input at the command line: one clear line, the right exit code, and
# nothing written to any member.
set -eu
. scripts/vm/scenarios/lib.sh
DISK=${1:-/dev/vda}
before=$(dd if="$DISK" bs=1M count=4 iflag=direct 2>/dev/null | sha256sum)

expect() { # expect CODE PATTERN CMD...
	code=$1
	pat=$2
	shift 2
	set +e
	out=$("$@" 2>&1)
	rc=$?
	set -e
	[ "$rc" = "$code" ] || fail "'$*' exited $rc, want $code: $out"
	echo "$out" | grep -q -- "$pat" || fail "'$*' said '$out', want /$pat/"
	[ "$(echo "$out" | wc -l)" = 1 ] || fail "'$*' printed more than one line: $out"
	echo "ok: $* -> $out"
}

step "not root"
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
[ "$before" = "$after" ] || fail "a refused command changed $DISK"
echo "bad-input: ok"
