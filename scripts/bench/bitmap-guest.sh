#!/bin/sh
# Runs in the VM (scripts/bench/bitmap.sh boots it): what the write-intent
# bitmap costs. 4k random writes over the whole device at QD1 and QD32 on
# raid1 (2 NVMe members) and raid10 n2 (4 NVMe members, 64 KiB chunks):
# md with its internal bitmap and with none, ublk-raid with its bitmap and
# with none, all on the same disks, taking turns. Prints a markdown table.
set -eu
RUNTIME=${BENCH_RUNTIME:-8}
BIN=.build/ublk-raid
OUT=/tmp/bench
mkdir -p $OUT
last=$(($(nproc) - 1))
. scripts/bench/nvme.sh
for d in $D4; do
	echo "$d: volatile write cache: $(cat /sys/block/"${d#/dev/}"/queue/write_cache)"
	fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null
done
wipe() {
	for d in "$@"; do dd if=/dev/zero of="$d" bs=1M count=8 oflag=direct 2>/dev/null; done
}
jobs() { # jobs LABEL DEVICE
	for qd in 1 32; do
		# Steady state: one 4k write every 4 MiB first, so the measurement
		# is not about the first write to each region (the bitmap's
		# one-time cost; "writes that waited" below counts those).
		ios=$(($(blockdev --getsize64 "$2") >> 22))
		fio --name=warm --filename="$2" --direct=1 --ioengine=io_uring --rw=write:4092k --bs=4k --iodepth=8 \
			--number_ios="$ios" --eta=never >/dev/null
		fio --name="$1-qd$qd" --filename="$2" --direct=1 --ioengine=io_uring --rw=randwrite --bs=4k \
			--iodepth=$qd --time_based --runtime="$RUNTIME" --ramp_time=2 --cpus_allowed="$last" --eta=never \
			--output-format=json --output="$OUT/$1-qd$qd.json" >/dev/null
	done
}
for cfg in raid1:1:2 raid10:10:4; do
	name=${cfg%%:*}
	rest=${cfg#*:}
	level=${rest%%:*}
	n=${rest#*:}
	disks=$D4
	[ "$n" = 2 ] && disks=$D2
	chunk=--chunk=64
	[ "$level" = 1 ] && chunk=
	for bm in internal none; do
		# shellcheck disable=SC2086
		mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --level="$level" $chunk --bitmap=$bm \
			--raid-devices="$n" $disks >/dev/null 2>$OUT/md.err || { cat $OUT/md.err; exit 1; }
		[ $bm = internal ] && mdadm -X "$(echo "$disks" | cut -d' ' -f1)" | grep -i 'chunksize' | sed "s/^/md $name bitmap: /"
		jobs "md-$name-$bm" /dev/md0
		mdadm --stop /dev/md0 >/dev/null
		# shellcheck disable=SC2086
		mdadm --zero-superblock $disks
		# shellcheck disable=SC2086
		wipe $disks
	done
	for bm in on off; do
		flag=
		[ $bm = off ] && flag=--no-bitmap
		: >$OUT/u.out
		uchunk="--chunk 64K"
		[ "$level" = 1 ] && uchunk= # raid1 has no chunks (refused, as by mdadm)
		# shellcheck disable=SC2086
		"$BIN" run --level "$level" $uchunk --assume-clean $flag -q 1 $disks >$OUT/u.out 2>$OUT/u-$name-$bm.err &
		U=$!
		while [ ! -s $OUT/u.out ]; do sleep 0.1; done
		dev=$(cat $OUT/u.out)
		jobs "ublk-$name-$bm" "$dev"
		"$BIN" del -n "$(echo "$dev" | tr -dc 0-9)" >/dev/null
		wait $U
		grep -h '"msg":"bitmap' "$OUT/u-$name-$bm.err" | sed "s/^/ublk $name bitmap $bm: /" || true
		# shellcheck disable=SC2086
		wipe $disks
	done
done
echo
OUT="$OUT" python3 - <<'PY'
import json, os, glob
out = os.environ["OUT"]
def iops(path):
    j = json.load(open(path))["jobs"][0]
    return j["write"]["iops"], j["write"]["total_ios"]
def bstats(name):
    # the "bitmap stats" line ublk-raid logs when the array stops
    for line in open(f"{out}/u-{name}-on.err"):
        if '"bitmap stats"' in line:
            return json.loads(line)
    return None
print("| level | iodepth | md bitmap | md none | md bitmap/none | ublk-raid bitmap | ublk-raid none | ublk-raid bitmap/none | ublk-raid bitmap / md bitmap |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for level in ("raid1", "raid10"):
    for qd in (1, 32):
        mb, _ = iops(f"{out}/md-{level}-internal-qd{qd}.json")
        mn, _ = iops(f"{out}/md-{level}-none-qd{qd}.json")
        ub, _ = iops(f"{out}/ublk-{level}-on-qd{qd}.json")
        un, _ = iops(f"{out}/ublk-{level}-off-qd{qd}.json")
        print(f"| {level} | {qd} | {mb:.0f} | {mn:.0f} | {mb/mn:.2f} | {ub:.0f} | {un:.0f} | {ub/un:.2f} | {ub/mb:.2f} |")
print()
print("| level | data writes | bitmap block writes (all members) | per 1000 data writes | writes that waited | regions |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for level in ("raid1", "raid10"):
    s = bstats(level)
    if s:
        per = 1000 * s["block_writes"] / max(1, s["data_writes"])
        print(f"| {level} | {s['data_writes']} | {s['block_writes']} | {per:.2f} | {s['waited']} | {s['regions']} |")
PY
