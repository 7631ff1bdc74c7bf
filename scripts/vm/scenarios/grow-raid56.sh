#!/bin/sh
# Online grow of raid5 and raid6 (mdadm --grow --size=max): members under
# dm-linear grow in place (the added space full of leftovers), then
# `grow -n N --size max` under fio verify on a mounted ext4. raid5 runs
# with the default bitmap (the added stripes are never written: a first
# write computes their parity from the whole stripe), raid6 with
# --no-bitmap (a resync from the old end builds their parity). Then
# resize2fs, fio verify across the new space, check finds mismatch_cnt 0
# and a reassembly keeps the grown size and the data. Without
# UBLK_F_UPDATE_SIZE (6.12) grow is refused with exit 1 (grow.sh checks
# that the refusal changes nothing).
set -eu
. scripts/vm/scenarios/lib.sh
set -- ${GROW_DISKS:-/dev/vdc /dev/vdd /dev/vde /dev/vdf}
STATE=$SCRATCH/g56-state.json
MNT=/mnt/g56
mkdir -p "$MNT"
cleanup() {
	umount "$MNT" 2>/dev/null || true
	stop_servers
	for i in 0 1 2 3; do dmsetup remove "ubr-q$i" 2>/dev/null || true; done
}
trap cleanup EXIT
small=$((96 * 2048))
large=$((192 * 2048))
json() { "$BIN" detail -n "$N" -o json; }
# rss: the daemon's resident memory, for the log (the VM has 2 GiB).
rss() { echo "serve: $(grep VmRSS /proc/"$SERVER_PID"/status 2>/dev/null | tr -s ' \t' ' ') ($*)"; }
field() { json | python3 -c 'import json,sys; d=json.load(sys.stdin); v=d
for k in sys.argv[1].split("."): v=v[k]
print(v if not isinstance(v, list) else " ".join(v))' "$1"; }
for leg in "5 3 " "6 4 --no-bitmap"; do
	set -- ${GROW_DISKS:-/dev/vdc /dev/vdd /dev/vde /dev/vdf}
	level=${leg%% *}
	rest=${leg#* }
	n=${rest%% *}
	flags=${rest#* }
	name=raid$level
	step "$name: $n members of 96 MiB under dm-linear, the disks' tails full of leftovers"
	members=
	i=0
	for d in "$@"; do
		[ $i -lt "$n" ] || break
		# Leftovers where the members will grow (0x5a + the role).
		tr '\000' "\\$(printf '%o' $((90 + i)))" </dev/zero |
			dd of="$d" bs=1M seek=96 count=96 iflag=fullblock oflag=direct 2>/dev/null || fail "filling $d"
		dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct 2>/dev/null
		dmsetup create "ubr-q$i" --table "0 $small linear $d 0" || fail "dmsetup create"
		members="$members /dev/mapper/ubr-q$i"
		i=$((i + 1))
	done
	rm -f "$STATE"
	start_serve "$SCRATCH/g56-$name"
	# shellcheck disable=SC2086
	DEV=$("$BIN" add --level $level --chunk 64K $flags $members) || fail "$name: add"
	N=$(echo "$DEV" | tr -dc 0-9)
	"$BIN" detail -n "$N" --wait >/dev/null || fail "detail --wait"
	# (No lazy init: ext4lazyinit's first writes later would kick region
	# resyncs, and grow waits for those.)
	mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$DEV" || fail "mkfs"
	mount "$DEV" "$MNT" || fail "mount"
	fio --name=old --filename="$MNT/old.fio" --rw=randwrite --bs=8k --iodepth=8 --direct=1 --ioengine=libaio --eta=never \
		--verify_state_save=0 --size=32M --verify=crc32c --do_verify=1 --verify_fatal=1 --output="$SCRATCH/g56-old.fio" ||
		{ cat "$SCRATCH/g56-old.fio"; fail "$name: fio old"; }
	# The file fio rewrites during the grow, laid out now: its first
	# writes have their regions resynced before the grow.
	fio --name=busy --filename="$MNT/busy.fio" --size=16M --create_only=1 --eta=never >/dev/null || fail "fio layout"
	sync
	old_size=$(blockdev --getsize64 "$DEV")
	old_fs=$(df -B1 --output=size "$MNT" | tail -n1 | tr -d ' ')

	step "$name: the members grow in place (dm-linear to 192 MiB)"
	i=0
	for d in "$@"; do
		[ $i -lt "$n" ] || break
		dmsetup reload "ubr-q$i" --table "0 $large linear $d 0" && dmsetup resume "ubr-q$i" || fail "dm grow ubr-q$i"
		i=$((i + 1))
	done
	[ "$(blockdev --getsize64 "$DEV")" = "$old_size" ] || fail "the size changed before grow"
	if ! field ublk_flags | grep -qw update_size; then
		set +e
		"$BIN" grow -n "$N" --size max 2>"$SCRATCH/g56-ref.err"
		rc=$?
		set -e
		[ $rc = 1 ] && grep -q UPDATE_SIZE "$SCRATCH/g56-ref.err" ||
			{ cat "$SCRATCH/g56-ref.err"; fail "$name: grow without UPDATE_SIZE: exit $rc"; }
		[ "$(blockdev --getsize64 "$DEV")" = "$old_size" ] || fail "a refused grow changed the size"
		echo "$name: refused on $(uname -r): $(cat "$SCRATCH/g56-ref.err")"
	else
		step "$name: grow -n $N --size max while mounted, under fio verify"
		fio --name=busy --filename="$MNT/busy.fio" --rw=randwrite --bs=8k --iodepth=16 --direct=1 --ioengine=libaio \
			--eta=never --verify_state_save=0 --size=16M --loops=4 --verify=crc32c --do_verify=1 --verify_fatal=1 \
			--output="$SCRATCH/g56-busy.fio" &
		FIO=$!
		sleep 1
		kill -0 $FIO 2>/dev/null || { cat "$SCRATCH/g56-busy.fio"; fail "fio ended before the grow"; }
		rss "before grow"
		# Refused while a resync runs (the first writes' regions): then
		# tried again once it ended, as a user would.
		i=0
		until "$BIN" grow -n "$N" --size max >"$SCRATCH/g56-grow.out" 2>"$SCRATCH/g56-grow.err"; do
			grep -q 'resync is running\|resync is pending' "$SCRATCH/g56-grow.err" && [ $i -lt 10 ] ||
				{ cat "$SCRATCH/g56-grow.err"; fail "$name: grow failed"; }
			cat "$SCRATCH/g56-grow.err"
			"$BIN" detail -n "$N" --wait >/dev/null || true
			i=$((i + 1))
		done
		wait $FIO || { cat "$SCRATCH/g56-busy.fio"; fail "$name: fio under grow exited $?"; }
		[ "$(fio_errors "$SCRATCH/g56-busy.fio")" = 0 ] || fail "$name: fio under grow reported errors"
		new_size=$(blockdev --getsize64 "$DEV")
		# Each member gives 96 MiB more, in whole 64 KiB chunks.
		data=$((n - level + 4))
		[ "$new_size" -ge $((old_size + (96 * 1048576 - 65536) * data)) ] ||
			fail "$name: device is $new_size bytes after grow (was $old_size)"
		[ "$(field size_bytes)" = "$new_size" ] || fail "detail says $(field size_bytes), the device $new_size"

		step "$name: resize2fs, old data verifies, fio across the new space"
		resize2fs "$DEV" >"$SCRATCH/g56-resize.out" 2>&1 || { cat "$SCRATCH/g56-resize.out"; fail "resize2fs"; }
		new_fs=$(df -B1 --output=size "$MNT" | tail -n1 | tr -d ' ')
		[ "$new_fs" -gt "$old_fs" ] || fail "ext4 is $new_fs bytes after resize2fs (was $old_fs)"
		fio --name=old --filename="$MNT/old.fio" --rw=randwrite --bs=8k --size=32M --verify=crc32c --verify_only=1 \
			--verify_state_save=0 --eta=never --output="$SCRATCH/g56-old2.fio" || fail "$name: old data no longer verifies"
		fill=$(((new_fs - old_fs) / 1048576 + 32))
		# (More than the old filesystem had free: part of it lands in the
		# new space.)
		fio --name=new --filename="$MNT/new.fio" --rw=write --bs=256k --iodepth=8 --direct=1 --ioengine=libaio --eta=never \
			--verify_state_save=0 --size="${fill}M" --verify=crc32c --do_verify=1 --verify_fatal=1 \
			--output="$SCRATCH/g56-new.fio" || { cat "$SCRATCH/g56-new.fio"; fail "$name: fio new"; }
		[ "$(fio_errors "$SCRATCH/g56-new.fio")" = 0 ] || fail "$name: fio new reported errors"
		sync
		step "$name: the background jobs end, check: mismatch_cnt 0"
		"$BIN" detail -n "$N" --wait >/dev/null || true
		"$BIN" check -n "$N" >/dev/null || fail "check"
		"$BIN" detail -n "$N" --wait >/dev/null || true
		[ "$(field sync.mismatch_cnt)" = 0 ] || { json; fail "$name: check found mismatches"; }

		step "$name: reassembly keeps the grown size and the data"
		umount "$MNT"
		rss "before del"
		"$BIN" del -n "$N" >/dev/null || fail "del"
		sleep 2
		rss "after del"
		# shellcheck disable=SC2086
		DEV=$("$BIN" add $members) || fail "assemble"
		N=$(echo "$DEV" | tr -dc 0-9)
		[ "$(blockdev --getsize64 "$DEV")" = "$new_size" ] || fail "reassembled at $(blockdev --getsize64 "$DEV"), grown was $new_size"
		mount "$DEV" "$MNT" || fail "mount after reassembly"
		rss "reassembled"
		fio --name=old --filename="$MNT/old.fio" --rw=randwrite --bs=8k --size=32M --verify=crc32c --verify_only=1 \
			--verify_state_save=0 --eta=never --output="$SCRATCH/g56-old3.fio" || fail "$name: old data no longer verifies after reassembly"
		fio --name=new --filename="$MNT/new.fio" --rw=write --bs=256k --size="${fill}M" --verify=crc32c --verify_only=1 \
			--verify_state_save=0 --eta=never --output="$SCRATCH/g56-new3.fio" || fail "$name: new data no longer verifies after reassembly"
	fi
	umount "$MNT"
	"$BIN" del -n "$N" >/dev/null || fail "del"
	kill -TERM "$SERVER_PID"
	wait "$SERVER_PID" || fail "serve exited $?"
	for i in 0 1 2 3; do dmsetup remove "ubr-q$i" 2>/dev/null || true; done
done
assert_no_devices
assert_no_kernel_io_errors
echo "grow-raid56: ok"
