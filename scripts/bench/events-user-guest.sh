#!/bin/sh
# Runs in the VM (scripts/bench/events-user.sh boots it): what one I/O asks
# of the guest kernel on the path a user gets, md (mdadm defaults, no
# bitmap, --assume-clean) vs ublk-raid (`serve` with default flags, then
# `add --level L --no-bitmap --assume-clean`), on the VM's emulated NVMe
# members, fio libaio not pinned. Counts per I/O fio completed:
#   - whole guest (perf stat -a): interrupts, context switches, syscalls
#     (fio's and the server's), and busy CPU time from /proc/stat;
#   - the ublk-raid server alone (perf stat -p): its syscalls (and of
#     them futex calls: the Go runtime handing processors between its
#     threads), context switches and CPU time.
# md and ublk-raid take turns per job, ROUNDS times; prints markdown tables
# of the medians.
set -eu
RUNTIME=${BENCH_RUNTIME:-5}
ROUNDS=${BENCH_ROUNDS:-1}
LEVELS=${BENCH_LEVELS:-1 10 0}
BIN=.build/ublk-raid
OUT=/tmp/bench
mkdir -p $OUT
echo "kernel: $(uname -r)"
. scripts/bench/nvme.sh
for d in $D4; do
	fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null
done
mount -t tracefs none /sys/kernel/tracing 2>/dev/null || true
SYS="-e irq:irq_handler_entry -e sched:sched_switch -e raw_syscalls:sys_enter"
SRV="-e raw_syscalls:sys_enter -e syscalls:sys_enter_futex -e sched:sched_switch -e task-clock"
JOBS="rr-qd1:--rw=randread --bs=4k --iodepth=1
rr-qd32:--rw=randread --bs=4k --iodepth=32
rw-qd32:--rw=randwrite --bs=4k --iodepth=32
seqread-1m:--rw=read --bs=1M --iodepth=8
seqwrite-1m:--rw=write --bs=1M --iodepth=8"
busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
job() { # job LABEL DEVICE ARGS [SERVER-PID]
	if [ -n "${4:-}" ]; then
		# shellcheck disable=SC2086
		perf stat -p "$4" $SRV -x, -o "$OUT/$1.srv" &
		sp=$!
		sleep 0.5
	fi
	b0=$(busy)
	# shellcheck disable=SC2086
	perf stat -a $SYS -x, -o "$OUT/$1.stat" -- fio --name="$1" --filename="$2" --direct=1 --ioengine=libaio \
		--size=512M --time_based --runtime="$RUNTIME" --eta=never --output-format=json --output="$OUT/$1.json" $3 >/dev/null
	echo "$(($(busy) - b0))" >"$OUT/$1.busy"
	if [ -n "${4:-}" ]; then
		kill -INT $sp
		wait $sp || true
	fi
}
if ! mkdir -p /var/lib/ublk-raid 2>/dev/null; then
	mount -t tmpfs tmpfs /var/lib
	mkdir -p /var/lib/ublk-raid
fi
r=1
while [ $r -le "$ROUNDS" ]; do
	for level in $LEVELS; do
		disks=$D4
		[ "$level" = 1 ] && disks=$D2
		echo "$JOBS" | while IFS=: read -r jname args; do
			# shellcheck disable=SC2086
			mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --level="$level" \
				$([ "$level" = 0 ] || echo --bitmap=none) --raid-devices="$(echo $disks | wc -w)" $disks >/dev/null 2>&1
			job "md-$level-$jname-$r" /dev/md0 "$args"
			mdadm --stop /dev/md0 >/dev/null 2>&1
			# shellcheck disable=SC2086
			mdadm --zero-superblock $disks
			rm -f /var/lib/ublk-raid/*
			"$BIN" serve >"$OUT"/serve.log 2>&1 &
			pid=$!
			until grep -q '"serving"' "$OUT"/serve.log; do sleep 0.1; done
			nb="--no-bitmap --assume-clean"
			[ "$level" = 0 ] && nb=
			# shellcheck disable=SC2086
			dev=$("$BIN" add --level "$level" $nb $disks)
			[ $r = 1 ] && [ "$jname" = rr-qd1 ] && "$BIN" detail -n "${dev#/dev/ublkb}" | grep -E 'Queues|Features' || true
			job "ublk-$level-$jname-$r" "$dev" "$args" "$pid"
			"$BIN" del -n "${dev#/dev/ublkb}" >/dev/null
			kill "$pid"
			while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
		done
	done
	r=$((r + 1))
done
echo
ROUNDS="$ROUNDS" LEVELS="$LEVELS" JOBS="$JOBS" OUT="$OUT" HZ="$(getconf CLK_TCK)" python3 - <<'PY'
import json, os, statistics
out, rounds, hz = os.environ["OUT"], int(os.environ["ROUNDS"]), int(os.environ["HZ"])
jobs = [l.split(":")[0] for l in os.environ["JOBS"].splitlines() if l]
def ios(label):
    j = json.load(open(f"{out}/{label}.json"))["jobs"][0]
    return j["read"]["total_ios"] + j["write"]["total_ios"]
def iops(label):
    j = json.load(open(f"{out}/{label}.json"))["jobs"][0]
    return j["read"]["iops"] + j["write"]["iops"]
def stat(path):
    c = {}
    if os.path.exists(path):
        for line in open(path):
            f = line.strip().split(",")
            if len(f) > 2 and f[0] and f[0][0].isdigit():
                c[f[2]] = float(f[0])
    return c
def med(vals):
    return statistics.median(vals)
names = {"0": "raid0", "1": "raid1", "10": "raid10"}
for level in os.environ["LEVELS"].split():
    print(f"{names[level]}, no bitmap, per I/O (medians of {rounds} rounds)")
    print()
    print("| job | system | IOPS | interrupts | context switches | syscalls | busy CPU µs | server syscalls | server futex | server switches | server CPU µs |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for job in jobs:
        for sysname in ("md", "ublk"):
            rows = []
            for r in range(1, rounds + 1):
                l = f"{sysname}-{level}-{job}-{r}"
                n = ios(l)
                s = stat(f"{out}/{l}.stat")
                v = stat(f"{out}/{l}.srv")
                busy = int(open(f"{out}/{l}.busy").read()) / hz * 1e6
                rows.append((iops(l), s.get("irq:irq_handler_entry", 0) / n, s.get("sched:sched_switch", 0) / n,
                             s.get("raw_syscalls:sys_enter", 0) / n, busy / n,
                             v.get("raw_syscalls:sys_enter", 0) / n, v.get("syscalls:sys_enter_futex", 0) / n,
                             v.get("sched:sched_switch", 0) / n, v.get("task-clock", 0) * 1e3 / n))
            m = [med(x[i] for x in rows) for i in range(9)]
            srv = "—" if sysname == "md" else None
            cells = [f"{m[0]:.0f}", f"{m[1]:.2f}", f"{m[2]:.2f}", f"{m[3]:.2f}", f"{m[4]:.0f}"]
            cells += [srv] * 4 if srv else [f"{m[5]:.2f}", f"{m[6]:.2f}", f"{m[7]:.2f}", f"{m[8]:.0f}"]
            print(f"| {job} | {'md' if sysname == 'md' else 'ublk-raid'} | " + " | ".join(cells) + " |")
    print()
PY
