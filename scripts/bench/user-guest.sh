#!/bin/sh
# Runs in the VM (scripts/bench/user.sh boots it): what a user gets. The
# `serve` daemon with the flags of each configuration (the first: none, the
# defaults) and `add --level L` with default flags, against md created by
# mdadm with its defaults (512 KiB chunks, raid10 n2) and the bitmap said
# explicitly, on the same emulated NVMe members, taking turns per job,
# ROUNDS times. fio is not pinned (a user's is not). Prints a markdown
# table per level and bitmap setting: IOPS or MiB/s of md and of each
# configuration, and each configuration's ratio to md per round.
#   BENCH_RUNTIME (s per job, after a 2 s ramp), BENCH_ROUNDS,
#   BENCH_LEVELS ("1 10 0"), BENCH_BITMAPS ("on off"), BENCH_JOBS (names,
#   default all), BENCH_CONFIGS (lines LABEL|SERVE-FLAGS|ADD-FLAGS)
set -eu
RUNTIME=${BENCH_RUNTIME:-6}
ROUNDS=${BENCH_ROUNDS:-3}
LEVELS=${BENCH_LEVELS:-1}
BITMAPS=${BENCH_BITMAPS:-on}
CONFIGS=${BENCH_CONFIGS:-"default||"}
BIN=.build/ublk-raid
OUT=/tmp/bench
mkdir -p $OUT
NCPU=$(nproc)
echo "kernel: $(uname -r)"
. scripts/bench/nvme.sh
for d in $D4; do
	fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null
done
# NAME:KIND:FIO-ARGS (KIND iops or bw; NCPU: one submitter per vCPU).
ALLJOBS="rw-qd1:iops:--rw=randwrite --bs=4k --iodepth=1
rw-qd32:iops:--rw=randwrite --bs=4k --iodepth=32
rr-qd1:iops:--rw=randread --bs=4k --iodepth=1
rr-qd32:iops:--rw=randread --bs=4k --iodepth=32
rr-Nx16:iops:--rw=randread --bs=4k --iodepth=16 --numjobs=NCPU
rw-Nx16:iops:--rw=randwrite --bs=4k --iodepth=16 --numjobs=NCPU
mix16k-2x8:iops:--rw=randrw --rwmixread=70 --bs=16k --iodepth=8 --numjobs=2
seqread-1m:bw:--rw=read --bs=1M --iodepth=8
seqwrite-1m:bw:--rw=write --bs=1M --iodepth=8"
JOBS=
if [ -n "${BENCH_JOBS:-}" ]; then
	for j in $BENCH_JOBS; do
		JOBS="$JOBS$(echo "$ALLJOBS" | grep "^$j:")
"
	done
else
	JOBS="$ALLJOBS
"
fi
. scripts/bench/serve-guest.sh
md_up() { # md_up LEVEL BITMAP DISKS...
	l=$1
	b=internal
	[ "$2" = off ] && b=none
	shift 2
	[ "$l" = 0 ] && b= # md has no bitmap for raid0
	mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --level="$l" ${b:+--bitmap=$b} \
		--raid-devices=$# "$@" >/dev/null 2>&1
}
md_down() {
	mdadm --stop /dev/md0 >/dev/null 2>&1
	mdadm --zero-superblock "$@"
	wipe "$@"
}
r=1
while [ $r -le "$ROUNDS" ]; do
	for level in $LEVELS; do
		disks=$D4
		[ "$level" = 1 ] && disks=$D2
		bms=$BITMAPS
		[ "$level" = 0 ] && bms=off
		for bm in $bms; do
			while IFS=: read -r jname kind args <&3; do
				[ -n "$jname" ] || continue
				# shellcheck disable=SC2086
				md_up "$level" "$bm" $disks
				job "md-$level-$bm-$r-$jname" /dev/md0 "$kind" "$args"
				# shellcheck disable=SC2086
				md_down $disks
				while IFS='|' read -r label sflags aflags <&4; do
					[ -n "$label" ] || continue
					serve_up "$sflags"
					nb=
					# (Without a bitmap a new array syncs in full first,
					# as md's does: --assume-clean, as md gets.)
					[ "$bm" = off ] && [ "$level" != 0 ] && nb="--no-bitmap --assume-clean"
					# shellcheck disable=SC2086
					dev=$("$BIN" add --level "$level" $nb $aflags $disks)
					job "ublk-$label-$level-$bm-$r-$jname" "$dev" "$kind" "$args"
					"$BIN" del -n "$(echo "$dev" | tr -dc 0-9)" >/dev/null
					serve_down
					# shellcheck disable=SC2086
					wipe $disks
				done 4<<EOF4
$CONFIGS
EOF4
			done 3<<EOF3
$JOBS
EOF3
		done
	done
	r=$((r + 1))
done
echo
JOBS="$JOBS" ROUNDS="$ROUNDS" LEVELS="$LEVELS" BITMAPS="$BITMAPS" CONFIGS="$CONFIGS" OUT="$OUT" NCPU="$NCPU" python3 - <<'PY'
import json, os, statistics
env = os.environ
out, rounds = env["OUT"], int(env["ROUNDS"])
configs = [c.split("|")[0] for c in env["CONFIGS"].splitlines() if c.strip()]
jobs = [j.split(":")[:2] for j in env["JOBS"].splitlines() if j.strip()]
def val(label, kind):
    j = json.load(open(f"{out}/{label}.json"))["jobs"][0]
    r, w = j["read"], j["write"]
    return r["iops"] + w["iops"] if kind == "iops" else (r["bw"] + w["bw"]) / 1024
for level in env["LEVELS"].split():
    for bm in (["off"] if level == "0" else env["BITMAPS"].split()):
        print(f"\nraid{level}, bitmap {bm} (md: {'none' if bm == 'off' or level == '0' else 'internal'}), {env['NCPU']} vCPUs\n")
        print("| job | unit | md | " + " | ".join(configs) + " | " + " | ".join(f"{c} / md (per round)" for c in configs) + " |")
        print("| --- | --- | ---: | " + " | ".join("---:" for _ in configs) + " | " + " | ".join("---" for _ in configs) + " |")
        for name, kind in jobs:
            name_shown = name.replace("N", env["NCPU"]) if "Nx" in name else name
            ms = [val(f"md-{level}-{bm}-{r}-{name}", kind) for r in range(1, rounds + 1)]
            m = statistics.median(ms)
            fmt = "{:.0f}" if kind == "iops" else "{:.0f}"
            cells, ratios = [], []
            for c in configs:
                us = [val(f"ublk-{c}-{level}-{bm}-{r}-{name}", kind) for r in range(1, rounds + 1)]
                u = statistics.median(us)
                cells.append(fmt.format(u))
                per = " ".join(f"{b / a:.2f}" for a, b in zip(ms, us))
                ratios.append(f"**{u / m:.2f}** ({per})")
            print(f"| {name_shown} | {'IOPS' if kind == 'iops' else 'MiB/s'} | {fmt.format(m)} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
PY
