#!/bin/sh
# Runs in the VM (scripts/bench/peer.sh boots it): the same fio jobs on one
# emulated NVMe namespace, (a) raw, (b) through `ublk-raid passthrough` with
# default flags, (c) through ublksrv's loop target (the C reference server,
# UBLKSRV: its `ublk` program; skipped when unset) with its defaults. All
# exist at once and take turns per job, ROUNDS times; fio (libaio, direct)
# is not pinned. Prints a markdown table of medians and per-round ratios.
set -eu
RUNTIME=${BENCH_RUNTIME:-6}
ROUNDS=${BENCH_ROUNDS:-3}
UBLKSRV=${UBLKSRV:-}
BIN=.build/ublk-raid
OUT=/tmp/bench
mkdir -p $OUT
echo "kernel: $(uname -r)"
. scripts/bench/nvme.sh
DISK=$(echo "$D2" | cut -d' ' -f1)
fio --name=fill --filename="$DISK" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null
: >$OUT/pt.out
"$BIN" passthrough "$DISK" >$OUT/pt.out 2>$OUT/pt.err &
PT=$!
i=0
while [ ! -s $OUT/pt.out ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat $OUT/pt.err; exit 1; }
	sleep 0.1
done
UB=$(cat $OUT/pt.out)
targets="raw ublk"
if [ -n "$UBLKSRV" ]; then
	before=$(ls /dev/ublkb* 2>/dev/null | sort)
	"$UBLKSRV" add -t loop -f "$DISK" >$OUT/ublksrv.out 2>&1 || { cat $OUT/ublksrv.out; exit 1; }
	i=0
	until [ "$(ls /dev/ublkb* 2>/dev/null | sort)" != "$before" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || { cat $OUT/ublksrv.out; exit 1; }
		sleep 0.1
	done
	SRV=$(ls /dev/ublkb* | sort | grep -v -x -F "$before" | head -1)
	targets="raw ublk ublksrv"
	"$UBLKSRV" list 2>&1 | grep -i -E 'queues|flags' | head -3 || true
fi
dev() { case $1 in raw) echo "$DISK" ;; ublk) echo "$UB" ;; ublksrv) echo "$SRV" ;; esac; }
. scripts/bench/jobs.sh
echo "$JOBS" | while IFS=: read -r name _ a1 a2 a3; do
	r=1
	while [ $r -le "$ROUNDS" ]; do
		for t in $targets; do
			fio --name="$t-$name-$r" --filename="$(dev $t)" --direct=1 --ioengine=libaio --size=1G --time_based \
				--runtime="$RUNTIME" --ramp_time=2 --eta=never --output-format=json \
				--output="$OUT/$t-$name-$r.json" "$a1" "$a2" "$a3" >/dev/null
		done
		r=$((r + 1))
	done
done
[ -n "$UBLKSRV" ] && "$UBLKSRV" del -n "$(echo "$SRV" | tr -dc 0-9)" >/dev/null 2>&1
"$BIN" del -n "$(echo "$UB" | tr -dc 0-9)" >/dev/null
wait $PT
echo
JOBS="$JOBS" ROUNDS="$ROUNDS" OUT="$OUT" TARGETS="$targets" python3 - <<'PY'
import json, os, statistics
out, rounds, targets = os.environ["OUT"], int(os.environ["ROUNDS"]), os.environ["TARGETS"].split()
def val(path, kind):
    j = json.load(open(path))["jobs"][0]
    r, w = j["read"], j["write"]
    return r["iops"] + w["iops"] if kind == "iops" else (r["bw"] + w["bw"]) / 1024
names = {"raw": "raw member", "ublk": "ublk-raid passthrough", "ublksrv": "ublksrv loop"}
cols = [names[t] for t in targets] + [f"{names[t]} / raw (per round)" for t in targets[1:]]
if "ublksrv" in targets:
    cols.append("ublk-raid / ublksrv (per round)")
print("| job | unit | " + " | ".join(cols) + " |")
print("| --- | --- |" + " ---: |" * len(targets) + " --- |" * (len(cols) - len(targets)))
for line in os.environ["JOBS"].splitlines():
    name, kind = line.split(":")[:2]
    per = {t: [val(f"{out}/{t}-{name}-{r}.json", kind) for r in range(1, rounds + 1)] for t in targets}
    med = {t: statistics.median(v) for t, v in per.items()}
    fmt = "{:.0f}" if kind == "iops" else "{:.0f}"
    def ratio(a, b):
        rs = " ".join(f"{x / y:.2f}" for x, y in zip(per[a], per[b]))
        return f"**{statistics.median(x / y for x, y in zip(per[a], per[b])):.2f}** ({rs})"
    cells = [fmt.format(med[t]) for t in targets] + [ratio(t, "raw") for t in targets[1:]]
    if "ublksrv" in targets:
        cells.append(ratio("ublk", "ublksrv"))
    print(f"| {name} | {'IOPS' if kind == 'iops' else 'MiB/s'} | " + " | ".join(cells) + " |")
PY
