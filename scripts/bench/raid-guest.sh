#!/bin/sh
# Runs in the VM (scripts/bench/raid.sh boots it): the same fio jobs on md and
# on ublk-raid over the same disks, for raid0 (4 disks), raid1 (2 disks) and
# raid10 n2 (4 disks), 64 KiB chunks, no bitmap (md: --bitmap=none where md
# allows it). md and ublk-raid take turns per level, ROUNDS times (each round
# creates both afresh); prints a markdown table of medians.
set -eu
RUNTIME=${BENCH_RUNTIME:-8}
ROUNDS=${BENCH_ROUNDS:-3}
BIN=.build/ublk-raid
OUT=/tmp/bench
mkdir -p $OUT
last=$(($(nproc) - 1))
D4="/dev/vda /dev/vdb /dev/vdc /dev/vdd"
D2="/dev/vda /dev/vdb"
for d in $D4; do
	fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null
done
. scripts/bench/jobs.sh
jobs() { # jobs LABEL DEVICE
	echo "$JOBS" | while IFS=: read -r name kind a1 a2 a3; do
		fio --name="$1-$name" --filename="$2" --direct=1 --ioengine=io_uring --size=512M --time_based \
			--runtime="$RUNTIME" --ramp_time=2 --cpus_allowed="$last" --eta=never --output-format=json \
			--output="$OUT/$1-$name.json" "$a1" "$a2" "$a3" >/dev/null
	done
}
r=1
while [ $r -le "$ROUNDS" ]; do
for cfg in raid0:0:4 raid1:1:2 raid10:10:4; do
	name=${cfg%%:*}
	rest=${cfg#*:}
	level=${rest%%:*}
	n=${rest#*:}
	disks=$D4
	[ "$n" = 2 ] && disks=$D2
	opts="--bitmap=none --chunk=64"
	[ "$level" = 0 ] && opts=--chunk=64 # md: a bitmap is meaningless for raid0
	[ "$level" = 1 ] && opts=--bitmap=none # and a chunk for raid1
	# shellcheck disable=SC2086
	mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --level="$level" $opts \
		--raid-devices="$n" $disks >/dev/null
	jobs "md-$name-$r" /dev/md0
	mdadm --stop /dev/md0 >/dev/null
	# shellcheck disable=SC2086
	mdadm --zero-superblock $disks
	for d in $disks; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
	rm -f $OUT/u.out
	: >$OUT/u.out
	# shellcheck disable=SC2086
	"$BIN" run --level "$level" --chunk 64K -q 1 --no-bitmap $disks >$OUT/u.out 2>$OUT/u.err &
	U=$!
	while [ ! -s $OUT/u.out ]; do sleep 0.1; done
	dev=$(cat $OUT/u.out)
	jobs "ublk-$name-$r" "$dev"
	"$BIN" del -n "$(echo "$dev" | tr -dc 0-9)" >/dev/null
	wait $U
done
r=$((r + 1))
done
echo
JOBS="$JOBS" ROUNDS="$ROUNDS" OUT="$OUT" python3 - <<'PY'
import json, os, statistics
out, rounds = os.environ["OUT"], int(os.environ["ROUNDS"])
def val(path, kind):
    j = json.load(open(path))["jobs"][0]
    r, w = j["read"], j["write"]
    return r["iops"] + w["iops"] if kind == "iops" else (r["bw"] + w["bw"]) / 1024
print("| level | job | unit | md | ublk-raid | ublk-raid / md | ublk-raid / md per round |")
print("| --- | --- | --- | ---: | ---: | ---: | --- |")
for level in ("raid0", "raid1", "raid10"):
    for line in os.environ["JOBS"].splitlines():
        name, kind = line.split(":")[:2]
        ms = [val(f"{out}/md-{level}-{r}-{name}.json", kind) for r in range(1, rounds + 1)]
        us = [val(f"{out}/ublk-{level}-{r}-{name}.json", kind) for r in range(1, rounds + 1)]
        m, u = statistics.median(ms), statistics.median(us)
        fmt = "{:.0f}" if kind == "iops" else "{:.1f}"
        per = " ".join(f"{b / a:.2f}" for a, b in zip(ms, us))
        print(f"| {level} | {name} | {'IOPS' if kind == 'iops' else 'MiB/s'} | {fmt.format(m)} | {fmt.format(u)} | {u / m:.2f} | {per} |")
PY
