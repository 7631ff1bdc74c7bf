#!/bin/sh
# Runs in the VM (scripts/bench/copy-profile.sh boots it): 1 MiB sequential
# read and write, QD8, 6 s each, on md raid1 (mdadm defaults, no bitmap) and
# on ublk-raid raid1 (serve + add --no-bitmap) over the first two emulated
# NVMe members; prints the throughput, the block devices' request counts
# and sectors (average request size), the daemon's CPU ticks, and a
# system-wide perf profile (cpu-clock, flat, top symbols) of each ublk-raid
# job: where the CPU per byte goes.
set -u
BIN=.build/ublk-raid
OUT=/tmp/copy-profile
mkdir -p $OUT
echo "kernel: $(uname -r), cpu flags: $(grep -o -w 'erms\|fsrm' /proc/cpuinfo | sort -u | tr '\n' ' ')"
. scripts/bench/nvme.sh
for d in $D2; do fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null; done
if ! mkdir -p /var/lib/ublk-raid 2>/dev/null; then
	mount -t tmpfs tmpfs /var/lib
	mkdir -p /var/lib/ublk-raid
fi
M0=$(basename "$(echo "$D2" | cut -d' ' -f1)")
reqs() { awk -v rw="$2" '{ if (rw == "read") print $1, $3; else print $5, $7 }' "/sys/block/$1/stat"; }
job() { # job NAME DEV read|write
	d=$(basename "$2")
	set -- "$1" "$2" "$3" "$(reqs "$d" "$3")" "$(reqs "$M0" "$3")"
	fio --name="$1" --filename="$2" --direct=1 --ioengine=libaio --size=512M --time_based --runtime=6 \
		--rw="$3" --bs=1M --iodepth=8 --eta=never --output-format=json --output="$OUT/$1.json"
	python3 - "$OUT/$1.json" "$1" "$4" "$(reqs "$d" "$3")" "$5" "$(reqs "$M0" "$3")" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
bw = (j["read"]["bw"] + j["write"]["bw"]) / 1024
def delta(a, b):
    a, b = [int(x) for x in a.split()], [int(x) for x in b.split()]
    n, s = b[0] - a[0], b[1] - a[1]
    return f"{n} requests of {s * 512 / max(n, 1) / 1024:.0f} KiB"
print(f"{sys.argv[2]}: {bw:.0f} MiB/s; device {delta(sys.argv[3], sys.argv[4])}; member 0 {delta(sys.argv[5], sys.argv[6])}")
PY
}
mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --level=1 --bitmap=none --raid-devices=2 $D2 >/dev/null 2>&1
job md-read /dev/md0 read
job md-write /dev/md0 write
mdadm --stop /dev/md0 >/dev/null 2>&1
mdadm --zero-superblock $D2
"$BIN" serve >$OUT/serve.log 2>&1 &
SP=$!
until grep -q '"serving"' $OUT/serve.log; do sleep 0.1; done
DEV=$("$BIN" add --level 1 --no-bitmap --assume-clean $D2)
ticks() { awk '{print $14 + $15}' /proc/$SP/stat; }
for rw in read write; do
	t=$(ticks)
	job ublk-$rw "$DEV" $rw
	echo "ublk-$rw: daemon CPU $(($(ticks) - t)) ticks"
	perf record -q -e cpu-clock -a -o $OUT/perf-$rw.data -- fio --name=p --filename="$DEV" --direct=1 --ioengine=libaio \
		--size=512M --time_based --runtime=4 --rw=$rw --bs=1M --iodepth=8 --eta=never >/dev/null 2>&1
	echo "ublk-$rw: perf, top symbols (whole system, idle included):"
	perf report -q -i $OUT/perf-$rw.data --sort sym --stdio 2>/dev/null | grep '%' | head -8
done
"$BIN" del -n "$(echo "$DEV" | tr -dc 0-9)" >/dev/null
kill $SP
wait $SP
