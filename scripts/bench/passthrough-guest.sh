#!/bin/sh
# Runs in the VM (scripts/bench/passthrough.sh boots it): the same fio jobs on
# (a) the raw disk, (b) a ublk-raid passthrough device over it, (c) a kernel
# loop device with direct I/O over it. All three exist at once and each job
# runs on them in turn, ROUNDS times (interleaved, so drift in the emulator
# hits all three alike); the table shows medians. fio is pinned to the last
# vCPU; the ublk server runs one queue (-q 1: the kernel maps every CPU to it
# and its thread is pinned to vCPU 0), so fio and the queue thread do not
# share a vCPU, as loop's worker threads do not either.
set -eu
DISK=${1:-/dev/vda}
RUNTIME=${BENCH_RUNTIME:-8}
ROUNDS=${BENCH_ROUNDS:-3}
BIN=.build/ublk-raid
OUT=/tmp/bench
mkdir -p $OUT
last=$(($(nproc) - 1))
# Fill the disk once so reads hit allocated blocks of the host file.
fio --name=fill --filename="$DISK" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --size=1G --eta=never >/dev/null

rm -f $OUT/pt.out
: >$OUT/pt.out
"$BIN" passthrough -q 1 "$DISK" >$OUT/pt.out 2>$OUT/pt.err &
PT=$!
i=0
while [ ! -s $OUT/pt.out ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat $OUT/pt.err; exit 1; }
	sleep 0.1
done
UB=$(cat $OUT/pt.out)
LOOP=$(losetup --direct-io=on --show -f "$DISK")
sched() { sed 's/.*\[\(.*\)\].*/\1/' "/sys/block/${1#/dev/}/queue/scheduler"; }
SCHEDS="I/O schedulers: raw disk $(sched "$DISK"), ublk $(sched "$UB"), loop $(sched "$LOOP")."

job() { # job TARGET NAME FIO-ARGS...: one fio job, JSON to $OUT/NAME.json
	job_target=$1
	job_name=$2
	shift 2
	fio --name="$job_name" --filename="$job_target" --direct=1 --ioengine=io_uring --size=1G --time_based \
		--runtime="$RUNTIME" --ramp_time=2 --cpus_allowed="$last" --eta=never --output-format=json \
		--output="$OUT/$job_name.json" "$@" >/dev/null
}

. scripts/bench/jobs.sh

echo "$JOBS" | while IFS=: read -r name _ a1 a2 a3; do
	r=1
	while [ $r -le "$ROUNDS" ]; do
		job "$DISK" "raw-$name-$r" "$a1" "$a2" "$a3"
		job "$UB" "ublk-$name-$r" "$a1" "$a2" "$a3"
		job "$LOOP" "loop-$name-$r" "$a1" "$a2" "$a3"
		r=$((r + 1))
	done
done
"$BIN" del -n "$(echo "$UB" | tr -dc 0-9)" >/dev/null
wait $PT
losetup -d "$LOOP"

echo
JOBS="$JOBS" ROUNDS="$ROUNDS" OUT="$OUT" python3 - <<'PY'
import json, os, statistics
out, rounds = os.environ["OUT"], int(os.environ["ROUNDS"])
def val(path, kind):
    j = json.load(open(path))["jobs"][0]
    r, w = j["read"], j["write"]
    return r["iops"] + w["iops"] if kind == "iops" else (r["bw"] + w["bw"]) / 1024
print("| job | unit | raw disk | ublk passthrough | loop (direct I/O) | ublk / loop | ublk / loop per round |")
print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
for line in os.environ["JOBS"].splitlines():
    name, kind = line.split(":")[:2]
    per = {t: [val(f"{out}/{t}-{name}-{r}.json", kind) for r in range(1, rounds + 1)] for t in ("raw", "ublk", "loop")}
    med = {t: statistics.median(v) for t, v in per.items()}
    fmt = "{:.0f}" if kind == "iops" else "{:.1f}"
    ratios = " ".join(f"{u / l:.2f}" for u, l in zip(per["ublk"], per["loop"]))
    print(f"| {name} | {'IOPS' if kind == 'iops' else 'MiB/s'} | {fmt.format(med['raw'])} | {fmt.format(med['ublk'])} | "
          f"{fmt.format(med['loop'])} | {med['ublk'] / med['loop']:.2f} | {ratios} |")
PY
echo
echo "$SCHEDS"
