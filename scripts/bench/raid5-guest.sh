#!/bin/sh
# Runs in the VM (scripts/bench/raid5.sh boots it): raid5 (and raid6) on
# five emulated NVMe members, 64 KiB chunk, the seed's case scaled to the VM
# (../shared/seeds/000_*: 4 KiB random writes at QD1, 20.6k IOPS without
# md's bitmap, 174 with it). Taking turns per job on the same members, each
# created afresh for it:
#   md-none      mdadm --bitmap=none
#   md-bitmap    mdadm --bitmap=internal (mdadm's default bitmap chunk)
#   md-tuned     --bitmap=none, group_thread_cnt 8, stripe_cache_size 8192 (the seed's tuning)
#   ublk         serve + add --level L --chunk 64K: the defaults (bitmap on)
#   ublk-nobm    the same with --no-bitmap --assume-clean
# md is created --assume-clean as the seed's was. Prints a markdown table
# per level: medians over ROUNDS, and the ratios the issue sets targets on.
#   BENCH_RUNTIME (s per job, after a 2 s ramp), BENCH_ROUNDS, BENCH_LEVELS ("5")
set -eu
RUNTIME=${BENCH_RUNTIME:-6}
ROUNDS=${BENCH_ROUNDS:-3}
LEVELS=${BENCH_LEVELS:-5}
BIN=.build/ublk-raid
OUT=/tmp/bench
mkdir -p $OUT
echo "kernel: $(uname -r)"
NVME_N=5
. scripts/bench/nvme.sh
for d in $D5; do
	fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null
done
JOBS="rw-qd1:iops:--rw=randwrite --bs=4k --iodepth=1
rw-qd32:iops:--rw=randwrite --bs=4k --iodepth=32
rr-qd32:iops:--rw=randread --bs=4k --iodepth=32
seqwrite-1m:bw:--rw=write --bs=1M --iodepth=8"
[ -n "${BENCH_JOBS:-}" ] && JOBS=$(echo "$JOBS" | grep -E "^($(echo "$BENCH_JOBS" | tr ' ' '|')):")
CONFIGS="md-none md-bitmap md-tuned ublk ublk-nobm"
. scripts/bench/serve-guest.sh
# up LEVEL CONFIG: creates the array, prints its device.
up() {
	case $2 in
	md-*)
		b=none
		[ "$2" = md-bitmap ] && b=internal
		# shellcheck disable=SC2086
		mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --level="$1" --chunk=64K \
			--bitmap=$b --raid-devices=5 $D5 >/dev/null 2>&1
		if [ "$2" = md-tuned ]; then
			echo 8 >/sys/block/md0/md/group_thread_cnt
			echo 8192 >/sys/block/md0/md/stripe_cache_size
		fi
		echo /dev/md0
		;;
	ublk*)
		serve_up ""
		nb=
		[ "$2" = ublk-nobm ] && nb="--no-bitmap --assume-clean"
		# shellcheck disable=SC2086
		"$BIN" add --level "$1" --chunk 64K $nb $D5
		;;
	esac
}
down() {
	case $1 in
	/dev/md0)
		mdadm --stop /dev/md0 >/dev/null 2>&1
		# shellcheck disable=SC2086
		mdadm --zero-superblock $D5
		;;
	*)
		"$BIN" del -n "$(echo "$1" | tr -dc 0-9)" >/dev/null
		serve_down
		;;
	esac
	# shellcheck disable=SC2086
	wipe $D5
}
r=1
while [ $r -le "$ROUNDS" ]; do
	for level in $LEVELS; do
		while IFS=: read -r jname kind args <&3; do
			[ -n "$jname" ] || continue
			for c in $CONFIGS; do
				dev=$(up "$level" "$c")
				job "$c-$level-$r-$jname" "$dev" "$kind" "$args"
				case $c in
				ublk*) # what the parity and bitmap did (warm-up included)
					curl -sf http://127.0.0.1:9999/metrics |
						grep -E '^ublkraid_(parity_stripe_writes_total|parity_log_waits_total|parity_stripe_waits_total|parity_direct_reads_total|parity_reconstruct_reads_total|bitmap_data_writes_total|bitmap_data_writes_waited_total|bitmap_writes_total)' |
						sed 's/{[^}]*kind="\([a-z_]*\)"}/_\1/; s/{[^}]*}//' >"$OUT/$c-$level-$r-$jname.metrics" || true
					;;
				esac
				down "$dev"
			done
		done 3<<EOF3
$JOBS
EOF3
	done
	r=$((r + 1))
done
echo
JOBS="$JOBS" ROUNDS="$ROUNDS" LEVELS="$LEVELS" CONFIGS="$CONFIGS" OUT="$OUT" python3 - <<'PY'
import json, os, statistics
env = os.environ
out, rounds = env["OUT"], int(env["ROUNDS"])
configs = env["CONFIGS"].split()
jobs = [j.split(":")[:2] for j in env["JOBS"].splitlines() if j.strip()]
def val(label, kind):
    j = json.load(open(f"{out}/{label}.json"))["jobs"][0]
    r, w = j["read"], j["write"]
    return r["iops"] + w["iops"] if kind == "iops" else (r["bw"] + w["bw"]) / 1024
ratios = [("ublk bitmap on/off", "ublk", "ublk-nobm"), ("md bitmap on/off", "md-bitmap", "md-none"),
          ("ublk / md-none", "ublk", "md-none"), ("ublk / md-tuned", "ublk", "md-tuned")]
for level in env["LEVELS"].split():
    print(f"\nraid{level}, 5 members, 64 KiB chunk\n")
    print("| job | unit | " + " | ".join(configs) + " | " + " | ".join(f"{n} (per round)" for n, _, _ in ratios) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in configs) + " | " + " | ".join("---" for _ in ratios) + " |")
    for name, kind in jobs:
        vals = {c: [val(f"{c}-{level}-{r}-{name}", kind) for r in range(1, rounds + 1)] for c in configs}
        cells = [f"{statistics.median(vals[c]):.0f}" for c in configs]
        rs = []
        for _, a, b in ratios:
            per = " ".join(f"{x / y:.2f}" for x, y in zip(vals[a], vals[b]))
            rs.append(f"**{statistics.median(vals[a]) / statistics.median(vals[b]):.3f}** ({per})")
        print(f"| {name} | {'IOPS' if kind == 'iops' else 'MiB/s'} | " + " | ".join(cells) + " | " + " | ".join(rs) + " |")
    print(f"\nublk-raid's counters after each job of round 1, its warm-up included (ublkraid_parity_*, ublkraid_bitmap_*):\n")
    for name, kind in jobs:
        for c in configs:
            if not c.startswith("ublk"):
                continue
            try:
                lines = open(f"{out}/{c}-{level}-1-{name}.metrics").read().split()
            except OSError:
                continue
            kv = dict(zip(lines[0::2], lines[1::2]))
            short = {k.replace("ublkraid_", "").replace("_total", ""): v for k, v in kv.items() if float(v) != 0}
            print(f"- {name}, {c}: " + ", ".join(f"{k} {float(v):.0f}" for k, v in sorted(short.items())))
PY
