#!/bin/sh
# Runs in the VM (scripts/bench/gomaxprocs.sh boots it): raid1 on two
# emulated NVMe members, md (mdadm defaults, no bitmap) against ublk-raid
# (`serve` + `add --level 1 --no-bitmap --assume-clean`) with the Go
# runtime's GOMAXPROCS left alone ("default": the CPU count), 4 and 3; per
# job fio's IOPS and, from perf stat -p on the server, its futex calls,
# context switches and CPU time over the job (about 5.3 s: a 1 s ramp, 4 s
# measured, perf started 0.3 s before). ROUNDS rounds (BENCH_ROUNDS).
set -u
BIN=.build/ublk-raid
OUT=/tmp/gmp
mkdir -p $OUT
ROUNDS=${BENCH_ROUNDS:-2}
. scripts/bench/nvme.sh
for d in $D2; do fio --name=fill --filename="$d" --rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=libaio --eta=never >/dev/null; done
mount -t tmpfs tmpfs /var/lib 2>/dev/null
mkdir -p /var/lib/ublk-raid
mount -t tracefs none /sys/kernel/tracing 2>/dev/null || true
run() { # NAME DEV RW BS QD [SERVER-PID]
	if [ -n "${6:-}" ]; then
		perf stat -x, -e syscalls:sys_enter_futex,sched:sched_switch,task-clock -p "$6" -o $OUT/s.stat &
		spp=$!
		sleep 0.3
	fi
	fio --name=p --filename="$2" --direct=1 --ioengine=libaio --size=512M --time_based --runtime=4 --ramp_time=1 \
		--rw="$3" --bs="$4" --iodepth="$5" --eta=never --output-format=json --output=$OUT/j.json >/dev/null 2>&1
	extra=""
	if [ -n "${6:-}" ]; then
		kill -INT $spp
		wait $spp
		extra=$(awk -F, '$3 ~ /futex|switch|clock/ {printf "%s=%s ", $3, $1}' $OUT/s.stat)
	fi
	python3 -c "import json; j=json.load(open('$OUT/j.json'))['jobs'][0]; print('$1 $3 $4 qd$5', int(j['read']['iops']+j['write']['iops']), 'iops', '$extra')"
}
jobs() { run "$1" "$2" randread 4k 1 "${3:-}"; run "$1" "$2" randwrite 4k 1 "${3:-}"; run "$1" "$2" randread 4k 32 "${3:-}"; run "$1" "$2" randwrite 4k 32 "${3:-}"; run "$1" "$2" read 1M 8 "${3:-}"; }
md() {
	# shellcheck disable=SC2086
	mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --level=1 --bitmap=none --raid-devices=2 $D2 >/dev/null 2>&1
	jobs md /dev/md0
	mdadm --stop /dev/md0 >/dev/null 2>&1
	# shellcheck disable=SC2086
	mdadm --zero-superblock $D2
}
ub() { # NAME GOMAXPROCS
	rm -f /var/lib/ublk-raid/*
	if [ -n "$2" ]; then GOMAXPROCS=$2 "$BIN" serve >$OUT/serve.log 2>&1 & else "$BIN" serve >$OUT/serve.log 2>&1 & fi
	sp=$!
	until grep -q '"serving"' $OUT/serve.log; do sleep 0.1; done
	# shellcheck disable=SC2086
	dev=$("$BIN" add --level 1 --no-bitmap --assume-clean $D2)
	jobs "$1" "$dev" $sp
	"$BIN" del -n "${dev#/dev/ublkb}" >/dev/null
	kill $sp
	while kill -0 $sp 2>/dev/null; do sleep 0.1; done
}
r=1
while [ $r -le "$ROUNDS" ]; do
	echo "round $r"
	md
	ub default ""
	ub gomaxprocs4 4
	ub gomaxprocs3 3
	r=$((r + 1))
done
