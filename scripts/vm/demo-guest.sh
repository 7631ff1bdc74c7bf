#!/bin/sh
# The demo itself (scripts/demo.sh runs it here or in the VM): ERASES the
# two disks given.
set -eu
A=$1
B=$2
BIN=$PWD/.build/ublk-raid
say() { printf '\n### %s\n' "$*"; }
run() {
	echo "\$ $*"
	"$@"
}
mkdir -p /tmp/demo
"$BIN" serve --state-file /tmp/demo/arrays.json >/tmp/demo/serve.log 2>&1 &
SERVE=$!
trap 'kill $SERVE 2>/dev/null; wait $SERVE 2>/dev/null || true' EXIT
i=0
until [ -S /run/ublk-raid/control.sock ]; do
	sleep 0.1
	i=$((i + 1))
	[ $i -lt 300 ] || { cat /tmp/demo/serve.log; exit 1; }
done
for d in "$A" "$B"; do dd if=/dev/zero of="$d" bs=1M count=8 oflag=direct 2>/dev/null; done
say "create a RAID1 (write-intent bitmap on by default)"
dev=$(run "$BIN" add --level 1 --force --name demo "$A" "$B" | tail -1)
echo "$dev"
N=$(echo "$dev" | tr -dc 0-9)
say "ext4 on it, and some files"
run mkfs.ext4 -q "$dev"
mkdir -p /mnt/demo
run mount "$dev" /mnt/demo
run dd if=/dev/urandom of=/mnt/demo/file bs=1M count=32 conv=fsync status=none
(cd /mnt/demo && sha256sum file >/tmp/demo/sums)
say "detail"
run "$BIN" detail -n "$N"
say "metrics (a few of them)"
curl -s 127.0.0.1:9999/metrics | grep -E '^ublkraid_(state|disks|degraded|bitmap_dirty_regions|bitmap_writes_total|member_ops_total)' | head -20
say "a member fails; the array keeps serving"
run "$BIN" fail -n "$N" "$B"
run dd if=/dev/urandom of=/mnt/demo/file2 bs=1M count=16 conv=fsync status=none
run "$BIN" remove -n "$N" "$B"
say "re-add: only the regions written while it was away are copied"
run "$BIN" re-add -n "$N" "$B"
run "$BIN" detail -n "$N" --wait
say "check: every copy compared"
run "$BIN" check -n "$N"
"$BIN" detail -n "$N" --wait | tail -1
(cd /mnt/demo && sha256sum -c /tmp/demo/sums)
run umount /mnt/demo
run "$BIN" del -n "$N"
echo
echo "demo: ok"
