# shellcheck shell=sh
# Helpers the guest bench scripts that run `serve` share (sourced; they
# set BIN, OUT, RUNTIME and, where a job's args say NCPU, NCPU):
# wipe DISKS..., job LABEL DEVICE KIND ARGS, serve_up FLAGS, serve_down.
wipe() {
	for d in "$@"; do dd if=/dev/zero of="$d" bs=1M count=8 oflag=direct 2>/dev/null; done
}
job() { # job LABEL DEVICE KIND ARGS: fio, JSON to $OUT/LABEL.json
	# Writes run after a pass writing 4 KiB every 4 MiB of the range: the
	# first write to a bitmap region is a one-time cost for both.
	case "$4" in
	*write* | *randrw*)
		fio --name=warm --filename="$2" --direct=1 --ioengine=libaio --rw=write:4092k --bs=4k --iodepth=8 \
			--size=512M --eta=never >/dev/null
		# ublk-raid syncs the rest of a region after its first write
		# (raid5/6: builds its parity; md, created --assume-clean, has no
		# such sync): wait for it.
		case "$2" in
		/dev/ublkb*) "$BIN" detail -n "${2#/dev/ublkb}" --wait >/dev/null ;;
		esac
		;;
	esac
	# shellcheck disable=SC2046
	fio --name="$1" --filename="$2" --direct=1 --ioengine=libaio --size=512M --time_based \
		--runtime="$RUNTIME" --ramp_time=2 --group_reporting --eta=never --output-format=json \
		--output="$OUT/$1.json" $(echo "$4" | sed "s/NCPU/${NCPU:-1}/") >/dev/null
}
# The daemon's default state file is under /var/lib, read-only in the VM:
# a tmpfs there keeps serve's flags the defaults.
if ! mkdir -p /var/lib/ublk-raid 2>/dev/null; then
	mount -t tmpfs tmpfs /var/lib
	mkdir -p /var/lib/ublk-raid
fi
serve_up() { # serve_up SERVE-FLAGS
	rm -f /var/lib/ublk-raid/*
	# shellcheck disable=SC2086
	"$BIN" serve $1 >"$OUT"/serve.log 2>&1 &
	echo $! >"$OUT"/serve.pid
	i=0
	until grep -q '"serving"' "$OUT"/serve.log; do
		i=$((i + 1))
		[ $i -lt 300 ] || { cat "$OUT"/serve.log; exit 1; }
		sleep 0.1
	done
}
serve_down() {
	pid=$(cat "$OUT"/serve.pid)
	kill "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}
