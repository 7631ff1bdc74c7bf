#!/bin/sh
# Runs in the VM (scripts/bench/raid5-profile.sh boots it): a raid5 of the
# five emulated NVMe members served by `run` with a Go CPU profile
# (/mnt/out/rw32.prof), fio 4 KiB random writes at QD32 for 10 s (after a
# 2 s warm-up), the daemon's CPU ticks over it, then 5 s under a
# system-wide perf profile (top processes and symbols).
set -u
BIN=.build/ublk-raid
OUT=/mnt/out
NVME_N=5 . scripts/bench/nvme.sh
echo "kernel: $(uname -r)"
for d in $D5; do fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --size=600M --eta=never >/dev/null; done
if ! mkdir -p /var/lib/ublk-raid 2>/dev/null; then
	mount -t tmpfs tmpfs /var/lib
	mkdir -p /var/lib/ublk-raid
fi
# shellcheck disable=SC2086 # D5 is a list
"$BIN" run --level 5 --chunk 64K --no-bitmap --assume-clean --cpuprofile $OUT/rw32.prof $D5 >$OUT/run.log 2>&1 &
RP=$!
i=0
until ls /dev/ublkb* >/dev/null 2>&1 || [ $i -gt 100 ]; do sleep 0.1; i=$((i + 1)); done
DEV=$(ls /dev/ublkb* | head -1)
rw() { fio --name="$1" --filename="$DEV" --direct=1 --ioengine=libaio --size=512M --rw=randwrite --bs=4k --iodepth=32 \
	--time_based --runtime="$2" --eta=never; }
rw warm 2 >/dev/null
ticks() { awk '{print $14 + $15}' /proc/$RP/stat; }
t=$(ticks)
rw rw32 10 | grep -E 'IOPS|clat \(' | head -2
echo "daemon CPU: $(($(ticks) - t)) ticks in 10 s"
perf record -q -e cpu-clock -a -o /tmp/perf.data -- sh -c "$(command -v fio) --name=p --filename=$DEV --direct=1 --ioengine=libaio --size=512M --rw=randwrite --bs=4k --iodepth=32 --time_based --runtime=5 --eta=never >/dev/null 2>&1"
echo "perf, by process (whole system, idle included):"
perf report -q -i /tmp/perf.data --sort comm,dso --stdio 2>/dev/null | grep '%' | head -8
echo "perf, top symbols:"
perf report -q -i /tmp/perf.data --sort sym --stdio 2>/dev/null | grep '%' | head -25
kill -INT $RP
wait $RP
tail -1 $OUT/run.log
