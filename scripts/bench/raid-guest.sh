#!/bin/sh
# Runs in the VM (scripts/bench/raid.sh boots it): the same fio jobs on md and
# on ublk-raid over the same disks, for raid0 (4 disks), raid1 (2 disks) and
# raid10 n2 (4 disks), 64 KiB chunks, no bitmap (md: --bitmap=none where md
# allows it). md and ublk-raid take turns per job, each created afresh on the
# same disks, ROUNDS times; prints a markdown table of medians.
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
job() { # job LABEL DEVICE FIO-ARGS...: one fio job, JSON to $OUT/LABEL.json
	job_label=$1
	job_dev=$2
	shift 2
	fio --name="$job_label" --filename="$job_dev" --direct=1 --ioengine=io_uring --size=512M --time_based \
		--runtime="$RUNTIME" --ramp_time=2 --cpus_allowed="$last" --eta=never --output-format=json \
		--output="$OUT/$job_label.json" "$@" >/dev/null
}
. scripts/bench/arrays.sh
# Every job runs on md, then on ublk-raid, each created afresh on the same
# disks for it (both --assume-clean: no initial sync),
# so the two runs of a job are seconds apart and emulator drift hits both
# alike; ROUNDS rounds of that.
r=1
while [ $r -le "$ROUNDS" ]; do
	for cfg in raid0:0:4 raid1:1:2 raid10:10:4; do
		name=${cfg%%:*}
		rest=${cfg#*:}
		level=${rest%%:*}
		n=${rest#*:}
		disks=$D4
		[ "$n" = 2 ] && disks=$D2
		while IFS=: read -r jname _ a1 a2 a3 <&3; do
			md_up "$level" "$n" "$disks"
			job "md-$name-$r-$jname" /dev/md0 "$a1" "$a2" "$a3"
			md_down "$disks"
			dev=$(ublk_up "$level" "$disks")
			job "ublk-$name-$r-$jname" "$dev" "$a1" "$a2" "$a3"
			ublk_down "$dev"
		done 3<<EOF
$JOBS
EOF
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
