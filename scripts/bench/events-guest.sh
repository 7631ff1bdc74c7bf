#!/bin/sh
# Runs in the VM (scripts/bench/events.sh boots it): 4k random QD32 on md
# and on ublk-raid (raid0 over four disks, 64 KiB chunks, no bitmap), each
# under `perf stat -a` counting what each I/O asks of the kernel and of the
# emulated disks: virtio kicks (a kprobe on vp_notify), interrupts,
# io_uring_enter calls (fio's and the server's), context switches. md and
# ublk-raid take turns per job, ROUNDS times; prints a markdown table of
# per-I/O counts (medians).
set -eu
RUNTIME=${BENCH_RUNTIME:-6}
ROUNDS=${BENCH_ROUNDS:-3}
BIN=.build/ublk-raid
OUT=/tmp/bench
mkdir -p $OUT
last=$(($(nproc) - 1))
D4="/dev/vda /dev/vdb /dev/vdc /dev/vdd"
for d in $D4; do
	fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null
done
mount -t tracefs none /sys/kernel/tracing 2>/dev/null || true
perf probe -q -a vp_notify
EVENTS="probe:vp_notify irq:irq_handler_entry syscalls:sys_enter_io_uring_enter sched:sched_switch"
ev=
for e in $EVENTS; do ev="$ev -e $e"; done
. scripts/bench/arrays.sh
job() { # job LABEL DEVICE RW
	# shellcheck disable=SC2086
	perf stat -a $ev -x, -o "$OUT/$1.stat" -- fio --name="$1" --filename="$2" --direct=1 --ioengine=io_uring \
		--size=512M --time_based --runtime="$RUNTIME" --cpus_allowed="$last" --rw="$3" --bs=4k --iodepth=32 \
		--eta=never --output-format=json --output="$OUT/$1.json" >/dev/null
}
r=1
while [ $r -le "$ROUNDS" ]; do
	for rw in randread randwrite; do
		md_up 0 4 "$D4"
		job "md-$rw-$r" /dev/md0 $rw
		md_down "$D4"
		dev=$(ublk_up 0 "$D4")
		job "ublk-$rw-$r" "$dev" $rw
		ublk_down "$dev"
	done
	r=$((r + 1))
done
echo
EVENTS="$EVENTS" ROUNDS="$ROUNDS" OUT="$OUT" python3 - <<'PY'
import json, os, statistics
out, rounds, events = os.environ["OUT"], int(os.environ["ROUNDS"]), os.environ["EVENTS"].split()
def ios(label):
    j = json.load(open(f"{out}/{label}.json"))["jobs"][0]
    return (j["read"]["io_kbytes"] + j["write"]["io_kbytes"]) / 4
def counts(label):
    c = {}
    for line in open(f"{out}/{label}.stat"):
        f = line.strip().split(",")
        if len(f) > 2 and f[2] in events:
            c[f[2]] = float(f[0])
    return c
print("| job | system | IOPS | " + " | ".join(f"{e.split(':')[1]} / I/O" for e in events) + " |")
print("| --- | --- | ---: |" + " ---: |" * len(events))
for rw in ("randread", "randwrite"):
    for sysname, label in (("md raid0", "md"), ("ublk-raid raid0", "ublk")):
        per = []
        iops = []
        for r in range(1, rounds + 1):
            l = f"{label}-{rw}-{r}"
            n = ios(l)
            c = counts(l)
            per.append({e: c[e] / n for e in events})
            j = json.load(open(f"{out}/{l}.json"))["jobs"][0]
            iops.append(j["read"]["iops"] + j["write"]["iops"])
        cells = " | ".join(f"{statistics.median(p[e] for p in per):.2f}" for e in events)
        print(f"| {rw} 4k QD32 | {sysname} | {statistics.median(iops):.0f} | {cells} |")
PY
