#!/bin/sh
# Runs in the VM (scripts/bench/mixed.sh boots it): a mirror of a fast disk
# (/dev/vda) and a slow one (/dev/vdb, throttled by qemu). 4k random reads at
# QD1 and QD32 on md raid1, md raid10 n2, ublk-raid raid1 and ublk-raid raid10
# n2, in turns on the same two disks; prints a markdown table with each
# member's share of the reads (from /sys/block/vdX/stat).
set -eu
RUNTIME=${BENCH_RUNTIME:-8}
BIN=.build/ublk-raid
OUT=/tmp/bench
mkdir -p $OUT
last=$(($(nproc) - 1))
DISKS="/dev/vda /dev/vdb"
echo "rotational: vda=$(cat /sys/block/vda/queue/rotational) vdb=$(cat /sys/block/vdb/queue/rotational)"
for d in $DISKS; do
	fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null
done
reads() { awk '{print $1}' "/sys/block/$1/stat"; }
jobs() { # jobs LABEL DEVICE
	for qd in 1 32; do
		a0=$(reads vda)
		b0=$(reads vdb)
		fio --name="$1-qd$qd" --filename="$2" --direct=1 --ioengine=io_uring --size=512M --time_based \
			--runtime="$RUNTIME" --ramp_time=2 --cpus_allowed="$last" --eta=never --output-format=json \
			--rw=randread --bs=4k --iodepth="$qd" --output="$OUT/$1-qd$qd.json" >/dev/null
		echo "$(($(reads vda) - a0)) $(($(reads vdb) - b0))" >"$OUT/$1-qd$qd.split"
	done
}
for cfg in raid1:1 raid10:10; do
	name=${cfg%%:*}
	level=${cfg#*:}
	opts="--bitmap=none"
	[ "$level" = 10 ] && opts="--bitmap=none --layout=n2 --chunk=64"
	# shellcheck disable=SC2086
	mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --level="$level" $opts \
		--raid-devices=2 $DISKS >/dev/null 2>&1
	jobs "md-$name" /dev/md0
	mdadm --stop /dev/md0 >/dev/null
	# shellcheck disable=SC2086
	mdadm --zero-superblock $DISKS
	for d in $DISKS; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
	: >$OUT/u.out
	uchunk="--chunk 64K"
	[ "$level" = 1 ] && uchunk= # raid1 has no chunks (refused, as by mdadm)
	# shellcheck disable=SC2086
	"$BIN" run --level "$level" $uchunk -q 1 --assume-clean $DISKS >$OUT/u.out 2>$OUT/u.err &
	U=$!
	while [ ! -s $OUT/u.out ]; do sleep 0.1; done
	dev=$(cat $OUT/u.out)
	jobs "ublk-$name" "$dev"
	"$BIN" del -n "$(echo "$dev" | tr -dc 0-9)" >/dev/null
	wait $U
	# shellcheck disable=SC2086
	for d in $DISKS; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
done
echo
OUT="$OUT" python3 - <<'PY'
import json, os
out = os.environ["OUT"]
def val(p):
    j = json.load(open(f"{out}/{p}.json"))["jobs"][0]["read"]
    a, b = map(int, open(f"{out}/{p}.split").read().split())
    return j["iops"], j["clat_ns"]["mean"] / 1000, a / max(a + b, 1)
print("| job | array | IOPS | mean latency (µs) | reads on fast disk | / md raid1 |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for qd in (1, 32):
    base = val(f"md-raid1-qd{qd}")[0]
    for a in ("md-raid1", "md-raid10", "ublk-raid1", "ublk-raid10"):
        iops, lat, share = val(f"{a}-qd{qd}")
        label = a.replace("md-", "md ").replace("ublk-", "ublk-raid ")
        print(f"| randread 4k QD{qd} | {label} | {iops:.0f} | {lat:.0f} | {share:.0%} | {iops / base:.2f} |")
PY
