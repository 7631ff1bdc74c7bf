# shellcheck shell=sh
# Creating and removing the arrays the guest bench scripts compare, all
# over the same disks (sourced; needs BIN, the ublk-raid binary, and OUT, a
# scratch directory): md with --assume-clean and no bitmap, ublk-raid in
# the foreground with one queue and no bitmap, 64 KiB chunks for both.
md_up() { # md_up LEVEL N DISKS
	opts="--bitmap=none --chunk=64"
	[ "$1" = 0 ] && opts=--chunk=64 # md: a bitmap is meaningless for raid0
	[ "$1" = 1 ] && opts=--bitmap=none # and a chunk for raid1
	# shellcheck disable=SC2086
	mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --level="$1" $opts \
		--raid-devices="$2" $3 >/dev/null 2>&1
}
md_down() { # md_down DISKS
	mdadm --stop /dev/md0 >/dev/null 2>&1
	# shellcheck disable=SC2086
	mdadm --zero-superblock $1
	for d in $1; do dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null; done
}
ublk_up() { # ublk_up LEVEL DISKS: prints the device
	: >"$OUT"/u.out
	uchunk="--chunk 64K"
	[ "$1" = 1 ] && uchunk= # raid1 has no chunks (refused, as by mdadm)
	# shellcheck disable=SC2086
	"$BIN" run --level "$1" $uchunk -q 1 --no-bitmap --assume-clean $2 >"$OUT"/u.out 2>"$OUT"/u.err &
	echo $! >"$OUT"/u.pid
	i=0
	while [ ! -s "$OUT"/u.out ]; do
		i=$((i + 1))
		[ $i -lt 300 ] || { cat "$OUT"/u.err >&2; exit 1; }
		sleep 0.1
	done
	cat "$OUT"/u.out
}
ublk_down() { # ublk_down DEVICE
	"$BIN" del -n "$(echo "$1" | tr -dc 0-9)" >/dev/null
	# The server was started in ublk_up's subshell: not our child to wait
	# for. It must be gone (and its disks free) before md takes them.
	while kill -0 "$(cat "$OUT"/u.pid)" 2>/dev/null; do sleep 0.1; done
}
